// q4_gemm_v2: the second generation of moe_mma.cu's q4 tensor-core GEMM,
// kept in the development harness (not in the production package) until a
// measurement on the device shows it faster than the production q4_gemm.
// It is appended to moe_mma.cu's translation unit (the CUDA prelude, the
// dialect's common include, moe_mma.cu), so it uses that file's helpers,
// fragment layout, q4_dq decoding, q4_store epilogue and Q4_INSTANCE macro,
// and computes the same sums in the same order. Its block reads the tile
// table as q4_gemm does (q4_block_pairs: the count first).
//
// What differs from q4_gemm: the block stages its scales and biases for the
// whole width once (two runs of 64 rows for gate/up: 45 KiB at kd = 2816),
// rounded to fp16 in shared memory; it copies the codes with lanes along a
// row (coalesced); it issues the weight copies before waiting on the pair
// table; and it runs each full chunk as straight-line code for the warp's
// exact tile count (q4_chunk_nt).

// cp.async of 16 bytes reading the first `bytes` and zero-filling the rest.
__device__ __forceinline__ void cp_async16z(void* dst, const void* src, u32 bytes) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ u32 dyn_smem_size() {
	u32 n;
	asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
	return n;
}
__device__ __forceinline__ void trap_now() { asm volatile("trap;"); }

// Block geometry as moe_mma.cu's Q4Geo; the ring's stages hold codes and
// activations only, and the dynamic shared memory continues with the
// block's scales and biases for the whole width (q4_sb_len halves per run
// of rows and plane).
template <int WT, int TPW, int BKG, int STAGES>
struct Q4GeoV2 {
	static constexpr int NT = 128 * WT;
	static constexpr int BMT = 8 * TPW * WT;  // pairs per block (the table's bm)
	static constexpr u32 WB = BKG * 128 * 16; // codes: [group][row][16 B]
	static constexpr u32 AB = BKG * BMT * 64; // activations: [group][pair][64 B]
	static constexpr u32 STAGE = WB + AB;
	static constexpr u32 RING = STAGE * STAGES;
};
// Halves staged per run of sbr weight rows of g groups and per plane: the
// run's sbr·g scales (or biases) from a 16-byte aligned start (up to 7
// halves before the run) in whole 16-byte pieces.
__device__ __forceinline__ u32 q4_sb_len(u32 sbr, u32 g) { return ((sbr * g + 14u) >> 3) << 3; }

// One staged chunk for one warp: groups gi < BKG (gi < gv unless FULL) of
// the chunk starting at group g0, against the warp's first NTL n8 tiles of
// pairs. sw/sa: the chunk's codes and activations; sbs/sbb: the staged
// scales and biases, base[rb][h] the index of row wr0 + 16·rb + g + 8·h's
// group 0 there.
template <int NTL, bool FULL, int TPW, int BKG, int BMT>
__device__ __forceinline__ void q4_chunk(const u8* sw, const u8* sa, const u16* sbs, const u16* sbb,
                                         const u32 (&base)[2][2], u32 g0, u32 gv, u32 wr0, u32 tb, u32 g, u32 q,
                                         float (&acc)[2][TPW][4]) {
#pragma unroll
	for (int gi = 0; gi < BKG; gi++) {
		if (!FULL && (u32)gi >= gv) break;
		u32 af[2][2][4]; // [rb][step][reg]
		// The row's scale and bias: the block's staged halves, already fp16.
		q4_fragments(sw, (u32)gi, q, wr0, g, [&](int rb, int h, u32& s2, u32& b2) {
			u32 i = base[rb][h] + g0 + (u32)gi;
			s2 = lds16((const u8*)(sbs + i)) * 0x10001u;
			b2 = lds16((const u8*)(sbb + i)) * 0x10001u;
		}, af);
		const u8* ag = sa + (u32)gi * (u32)(BMT * 64) + 16u * q + (tb + g) * 64u;
#pragma unroll
		for (int tt = 0; tt < NTL; tt++) {
			v4u32 v = lds128(ag + 512u * tt);
#pragma unroll
			for (int rb = 0; rb < 2; rb++) {
				mma_f16(acc[rb][tt], af[rb][0][0], af[rb][0][1], af[rb][0][2], af[rb][0][3], v.x, v.y);
				mma_f16(acc[rb][tt], af[rb][1][0], af[rb][1][1], af[rb][1][2], af[rb][1][3], v.z, v.w);
			}
		}
	}
}

// q4_chunk for the warp's nt (1 … K) tiles, chosen at run time.
template <int K, bool FULL, int TPW, int BKG, int BMT>
__device__ __forceinline__ void q4_chunk_nt(u32 nt, const u8* sw, const u8* sa, const u16* sbs, const u16* sbb,
                                            const u32 (&base)[2][2], u32 g0, u32 gv, u32 wr0, u32 tb, u32 g, u32 q,
                                            float (&acc)[2][TPW][4]) {
	if constexpr (K >= 1) {
		if (nt == (u32)K) {
			q4_chunk<K, FULL, TPW, BKG, BMT>(sw, sa, sbs, sbb, base, g0, gv, wr0, tb, g, q, acc);
			return;
		}
		q4_chunk_nt<K - 1, FULL, TPW, BKG, BMT>(nt, sw, sa, sbs, sbb, base, g0, gv, wr0, tb, g, q, acc);
	}
}

// q4_gemm_v2: q4_gemm's contract (moe_mma.cu), staged as the file comment
// says.
template <int MODE, int WT, int TPW, int BKG, int STAGES>
__device__ __forceinline__ void q4_gemm_v2(Q4_PARAMS) {
	typedef Q4GeoV2<WT, TPW, BKG, STAGES> Geo;
	constexpr int NT = Geo::NT, BMT = Geo::BMT;
	constexpr u32 WB = Geo::WB, STAGE = Geo::STAGE, RING = Geo::RING;
	constexpr u32 NRUN = MODE == MODE_GATEUP ? 2u : 1u, SBR = MODE == MODE_GATEUP ? 64u : 128u;
	MOE_DYN_SMEM(smem);
	Q4_BLOCK(MODE, BMT, BKG);
	const u32 LEN = q4_sb_len(SBR, G);
	if (dyn_smem_size() < RING + 2u * NRUN * LEN * 2u) trap_now();
	u16* sbs = (u16*)(smem + RING);
	u16* sbb = sbs + NRUN * LEN;

	// First weight row of run j (gate / up rows of the block's columns, or
	// its rows) and the staged index of each lane row's group 0.
	auto run0 = [&](u32 j) -> u64 {
		if (MODE == MODE_GATEUP) return (u64)ex * 2u * nout + (u64)j * nout + n0;
		if (MODE == MODE_DOWN) return (u64)ex * nout + n0;
		return (u64)n0;
	};
	const u32 wr0 = (warp & 3u) * 32u;
	u32 base[2][2];
#pragma unroll
	for (int rb = 0; rb < 2; rb++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			u32 r = wr0 + 16u * rb + g + 8u * h;
			u32 j = MODE == MODE_GATEUP ? (u32)h : 0u;
			u32 rin = MODE == MODE_GATEUP ? 8u * (r >> 4) + g : r;
			base[rb][h] = j * LEN + (u32)((run0(j) * G) & 7u) + rin * G;
		}

	// Stagers of chunk c into ring slot st: the weight rows' codes (lanes
	// along a row's 16-byte groups) and the pairs' activations.
	auto load_w = [&](u32 c, u32 st) {
		u8* sw = smem + st * STAGE;
		const u32 g0 = c * BKG;
		const u32 gv = umin32(BKG, G - g0);
#pragma unroll
		for (int i = 0; i < 128 * BKG / NT; i++) {
			u32 ci = tid + (u32)(i * NT);
			u32 r = ci / BKG, gi = ci % BKG;
			bool ok;
			u64 wr = q4_wrow<MODE>(r, ex, n0, nout, ok);
			if (gi < gv) cp_async16(sw + gi * 2048u + r * 16u, codes + wr * rowBytes + (u64)(g0 + gi) * 16u);
		}
	};
	auto load_a = [&](u32 c, u32 st) {
		q4_load_a<BKG, BMT, NT>(smem + st * STAGE + WB, c, G, tid, cnt, trow, A, kd);
	};

	// Prologue, one commit group: the scales and biases of every run and
	// the codes of chunks 0 … STAGES−2 (which need no table), then, once the
	// pairs' rows are known, their activations.
#pragma unroll
	for (u32 j = 0; j < NRUN; j++) {
		u64 h0 = run0(j) * G, a0 = h0 & ~(u64)7u;
		u32 np = (u32)((h0 - a0 + (u64)SBR * G + 7u) >> 3);
		for (u32 pc = tid; pc < 2u * np; pc += NT) {
			u32 pl = pc >= np ? 1u : 0u, pi = pc - pl * np;
			u64 src = a0 + 8u * (u64)pi;
			if (src < halves) {
				u64 rem = 2u * (halves - src);
				cp_async16z((pl ? sbb : sbs) + j * LEN + 8u * pi, (pl ? biases : scales) + src, rem < 16u ? (u32)rem : 16u);
			}
		}
	}
#pragma unroll
	for (int s = 0; s < STAGES - 1; s++)
		if ((u32)s < nch) load_w((u32)s, (u32)s);
	q4_pair_rows<MODE, BMT, NT>(trow, tinv, tid, cnt, p0, pairs, topk, ainv);
	block_sync(); // trow
#pragma unroll
	for (int s = 0; s < STAGES - 1; s++)
		if ((u32)s < nch) load_a((u32)s, (u32)s);
#pragma unroll
	for (int s = 0; s < STAGES - 1; s++) cp_async_commit();

	const u32 tb = (warp >> 2) * (u32)(8 * TPW);
	const u32 nt = tb < cnt ? umin32((u32)TPW, (cnt - tb + 7u) >> 3) : 0u;
	float acc[2][TPW][4];
	q4_zero<TPW>(acc);

	for (u32 c = 0; c < nch; c++) {
		cp_async_wait<STAGES - 2>();
		block_sync();
		if (c == 0u) {
			// The prologue's group (the deltas and mins of every run) has
			// landed: round them to fp16 in place (sbb follows sbs).
			for (u32 i = tid; i < 2u * NRUN * LEN; i += NT) sbs[i] = (u16)bf2h(sbs[i]);
			block_sync();
		}
		{
			u32 cn = c + STAGES - 1u;
			if (cn < nch) {
				load_w(cn, cn % STAGES);
				load_a(cn, cn % STAGES);
			}
			cp_async_commit();
		}
		if (nt == 0u) continue;
		const u8* sw = smem + (c % STAGES) * STAGE;
		const u8* sa = sw + WB;
		const u32 g0 = c * BKG;
		const u32 gv = umin32(BKG, G - g0);
		if (gv == (u32)BKG)
			q4_chunk_nt<TPW, true, TPW, BKG, BMT>(nt, sw, sa, sbs, sbb, base, g0, gv, wr0, tb, g, q, acc);
		else
			q4_chunk_nt<TPW, false, TPW, BKG, BMT>(nt, sw, sa, sbs, sbb, base, g0, gv, wr0, tb, g, q, acc);
	}
	cp_async_wait<0>();
	if (nt == 0u) return;

	q4_store<MODE, TPW>(acc, nt, tb, cnt, p0, n0, wr0, g, q, tinv, pairs, wts, out, nout);
}

// Instances moe_q4_gateup_<cfg>, moe_q4_down_<cfg>, q4_dense_<cfg> (the
// dynamic shared memory is Q4GeoV2::RING plus the scale/bias runs; the Go
// side, v2Configs, mirrors the table).
Q4_INSTANCE(s2, q4_gemm_v2, 1, 4, 4, 4) // 32 pairs, 4 warps, 128 k a chunk, 4 stages (64 KiB ring)
Q4_INSTANCE(m2, q4_gemm_v2, 1, 8, 2, 4) // 64 pairs, 4 warps, 64 k a chunk, 4 stages (48 KiB ring)
Q4_INSTANCE(l2, q4_gemm_v2, 2, 8, 2, 3) // 128 pairs, 8 warps, 64 k a chunk, 3 stages (60 KiB ring)
