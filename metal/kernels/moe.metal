// The MoE's grouped expert GEMM on SIMD-group matrices (BackendOptions.MoE =
// MoESimdgroup; docs/metal.md, "The backend"): the work of router.kern's
// moe_expert_f32 — gate/up with gelu(gate)·up, down times the slot weight —
// over the same tile table (built by moe_scatter_u32 with tiles of ME_BM
// pairs), in gemm.metal's arithmetic: a fresh f32 partial per step of ME_BK
// from 8×8 SIMD-group matrix products, added to per-thread Kahan totals. A
// translation unit of its own: the Metal prelude, the common include, then
// this file.

#define ME_BM 32       // pairs per tile (the tile table's bm)
#define ME_BN 32       // output columns per group
#define ME_BK 32       // the reduction's step
#define ME_THREADS 128 // four SIMD groups

// me_stage_w stages step k0 of ME_BN weight rows wr0 + j (j < ME_BN; rows
// whose column n0 + j is at or past nout, and k past kd, are zeros) as
// ws[l][j], decoded with dgq_decode; consecutive threads read along a row.
INLINE void me_stage_w(THREADGROUP_MEM float* ws, const DEVICE_MEM u8* w0, const DEVICE_MEM u8* w1,
                       const DEVICE_MEM u8* w2, u32 fmt, u32 bits, u32 mat_rows, u64 wr0, u32 n0, u32 nout, u32 k0,
                       u32 kd, u32 tid) {
	for (u32 q = 0; q < 8u; q++) {
		u32 e = tid + ME_THREADS * q;
		u32 j = e / ME_BK;
		u32 l = e % ME_BK;
		float v = 0.0f;
		if (n0 + j < nout && k0 + l < kd) v = dgq_decode(w0, w1, w2, fmt, bits, wr0 + j, k0 + l, kd, mat_rows);
		ws[l * ME_BN + j] = v;
	}
}

// me_block multiplies the SIMD group's 16×16 block (rows sm, columns sn) of
// as·ws over one step into a fresh partial and stores it to part.
INLINE void me_block(const THREADGROUP_MEM float* as, const THREADGROUP_MEM float* ws, THREADGROUP_MEM float* part,
                     u32 sm, u32 sn) {
	simdgroup_float8x8 acc[2][2];
	for (u32 i = 0; i < 2u; i++) {
		for (u32 jj = 0; jj < 2u; jj++) acc[i][jj] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
	}
	for (u32 l = 0; l < ME_BK; l += 8u) {
		simdgroup_float8x8 fa[2];
		simdgroup_float8x8 fb[2];
		for (u32 i = 0; i < 2u; i++) simdgroup_load(fa[i], as + (sm + 8u * i) * ME_BK + l, ME_BK);
		for (u32 jj = 0; jj < 2u; jj++) simdgroup_load(fb[jj], ws + l * ME_BN + sn + 8u * jj, ME_BN);
		for (u32 i = 0; i < 2u; i++) {
			for (u32 jj = 0; jj < 2u; jj++) simdgroup_multiply_accumulate(acc[i][jj], fa[i], fb[jj], acc[i][jj]);
		}
	}
	for (u32 i = 0; i < 2u; i++) {
		for (u32 jj = 0; jj < 2u; jj++) simdgroup_store(acc[i][jj], part + (sm + 8u * i) * ME_BN + sn + 8u * jj, ME_BN);
	}
}

// moe_expert_sg_f32: group (GROUP_ID_X, GROUP_ID_Y) of ME_THREADS threads
// takes tile GROUP_ID_Y of the table (expert ex, pairs p0 … p0+cnt−1, cnt ≤
// ME_BM; groups past the table's count return) and output columns n0 =
// ME_BN·GROUP_ID_X onwards; the arguments are moe_expert_f32's:
//
//   gateup ≠ 0: a is u [tokens][kd] (pair row = token pairs[p]/topk), the
//     weight GateUp [E·2·nout][kd]: the gate rows ex·2·nout + n0 + j and the
//     up rows ex·2·nout + nout + n0 + j (j < ME_BN); out[p][n] =
//     gelu(gate)·up (dgq_moe_gelu_mul), out = z [pairs][nout]. SIMD groups 0
//     and 1 compute the gate partials, 2 and 3 the up ones.
//   gateup = 0: a is z [pairs][kd] (row p), the weight Down [E·nout][kd],
//     rows ex·nout + n0 + j; out[s][n] = f32(total)·wts[s] for the pair's
//     slot s = pairs[p], out = y [slots][nout]. Each SIMD group a 16×16
//     block.
KERNEL(moe_expert_sg_f32, CBUF(u8, w0, 0), CBUF(u8, w1, 1), CBUF(u8, w2, 2), CBUF(float, a, 3), CBUF(u32, pairs, 4),
       CBUF(u32, tiles, 5), CBUF(float, wts, 6), BUF(float, out, 7), SCALAR(u32, fmt, 8), SCALAR(u32, bits, 9),
       SCALAR(u32, kd, 10), SCALAR(u32, nout, 11), SCALAR(u32, topk, 12), SCALAR(u32, gateup, 13),
       SCALAR(u32, mat_rows, 14)) {
	SHARED(float, as, ME_BM * ME_BK);
	SHARED(float, wg, ME_BK * ME_BN);
	SHARED(float, wu, ME_BK * ME_BN);
	SHARED(float, pg, ME_BM * ME_BN);
	SHARED(float, pu, ME_BM * ME_BN);
	u32 tile = GROUP_ID_Y;
	if (tile >= tiles[0]) return;
	u32 ex = tiles[1u + 3u * tile];
	u32 p0 = tiles[2u + 3u * tile];
	u32 cnt = tiles[3u + 3u * tile];
	u32 tid = LOCAL_ID_X;
	u32 n0 = GROUP_ID_X * ME_BN;
	u64 wbase = gateup != 0u ? (u64)ex * 2u * nout : (u64)ex * nout;
	u32 s = SIMD_ID;
	// The SIMD group's block: gate/up, rows 16·(s & 1) of all 32 columns of
	// the gate (s < 2) or up (s ≥ 2) tile, as two 16×16 blocks; down, rows
	// 16·(s >> 1), columns 16·(s & 1).
	dgq_kahan tg[8];
	dgq_kahan tu[8];
	for (u32 q = 0; q < 8u; q++) {
		tg[q] = dgq_kahan_zero();
		tu[q] = dgq_kahan_zero();
	}
	for (u32 k0 = 0; k0 < kd; k0 += ME_BK) {
		for (u32 q = 0; q < 8u; q++) {
			u32 e = tid + ME_THREADS * q;
			u32 m = e / ME_BK;
			u32 l = e % ME_BK;
			float v = 0.0f;
			if (m < cnt && k0 + l < kd) {
				u64 arow = gateup != 0u ? (u64)(pairs[p0 + m] / topk) : (u64)(p0 + m);
				v = a[arow * kd + k0 + l];
			}
			as[m * ME_BK + l] = v;
		}
		me_stage_w(wg, w0, w1, w2, fmt, bits, mat_rows, wbase + n0, n0, nout, k0, kd, tid);
		if (gateup != 0u) me_stage_w(wu, w0, w1, w2, fmt, bits, mat_rows, wbase + nout + n0, n0, nout, k0, kd, tid);
		BARRIER();
		if (gateup != 0u) {
			const THREADGROUP_MEM float* ws = s < 2u ? wg : wu;
			THREADGROUP_MEM float* part = s < 2u ? pg : pu;
			me_block(as, ws, part, 16u * (s & 1u), 0u);
			me_block(as, ws, part, 16u * (s & 1u), 16u);
		} else {
			me_block(as, wg, pg, 16u * (s >> 1), 16u * (s & 1u));
		}
		BARRIER();
		for (u32 q = 0; q < 8u; q++) {
			tg[q] = dgq_kahan_add(tg[q], pg[tid + ME_THREADS * q]);
			if (gateup != 0u) tu[q] = dgq_kahan_add(tu[q], pu[tid + ME_THREADS * q]);
		}
	}
	for (u32 q = 0; q < 8u; q++) {
		u32 e = tid + ME_THREADS * q;
		u32 m = e / ME_BN;
		u32 j = e % ME_BN;
		if (m >= cnt || n0 + j >= nout) continue;
		if (gateup != 0u) {
			out[(u64)(p0 + m) * nout + n0 + j] = dgq_moe_gelu_mul(dgq_kahan_total(tg[q]), dgq_kahan_total(tu[q]));
		} else {
			u32 slot = pairs[p0 + m];
			out[(u64)slot * nout + n0 + j] = MUL_RN(dgq_kahan_total(tg[q]), wts[slot]);
		}
	}
}
