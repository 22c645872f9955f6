// Fast (PrecisionBF16) kernels of the CUDA backend: q4 grouped expert GEMMs
// on the tensor cores (mma.sync m16n8k16 f16, f32 accumulation), the f16
// packing of their activations, the fast path's tile table and combine, and
// the bf16 narrowing of matMulFast. CUDA-specific (NVRTC, sm_80 or later),
// compiled after the CUDA prelude and the dialect's common include
// (cuda/kernels.go); docs/cuda.md, "MoE", describes the design.
//
// Arithmetic. A q4 weight is w = f32(code·δ) + m per group of 32
// (docs/codecs.md), δ (delta, "scale") and m (min, "bias") bf16 in the
// resident planar layout (relayout.kern). The GEMM stages δ and m rounded to
// fp16 (to nearest even: δ' = δ(1 + e1), m' = m(1 + e2), |e| ≤ 2⁻¹¹ where
// they are normal fp16 numbers; below 2⁻¹⁴ the error is at most 2⁻²⁵
// absolute; above 65504 they overflow to ±Inf, which no trained weight's
// parameters reach) and decodes in registers as fp16: hfma2(code, δ', m'),
// one more rounding (e3). So |ŵ − w| ≤ 2⁻¹¹·(|code·δ| + |m| + |ŵ|) + O(2⁻²²):
// about 2⁻¹¹ of the group's range rather than of |w| itself, which the f32
// accumulation over many products averages down (docs/cuda.md measures it).
// Activations are rounded to fp16 after a per-row power-of-two scaling that
// puts the row's largest |value| in [2¹⁴, 2¹⁵) (so no row overflows or loses
// precision to fp16's range; the scaling is exact and undone in f32 on the
// result). Products accumulate in f32. So the only roundings beyond f32 are
// those of each weight (above) and one fp16 rounding of each activation
// (2⁻¹¹, against bf16's 2⁻⁹).
//
// Packed activations (moe_pack_f16). Rows of kd fp16 values; within every
// run of 8 (elements 8c…8c+7) they are stored in the order 0,4,1,5,2,6,3,7,
// so that the 16 bytes a thread loads for its k-slice are, as four u32,
// exactly its B-fragment registers of the two k16 steps of a group (below).
// inv[row] = 2^-e, the row's scaling undone.
//
// Fragment mapping (PTX ISA, mma.m16n8k16, .f16): lane = 4·g + q. The
// weights are the A operand (16 weight rows), the activations B (8 tokens).
//   A (16×16, row): reg0 = (row g, kf 2q, 2q+1), reg1 = (row g+8, kf 2q, 2q+1),
//                   reg2 = (row g, kf 2q+8, 2q+9), reg3 = (row g+8, kf 2q+8, 2q+9)
//   B (16×8, col):  reg0 = (kf 2q, 2q+1; col g), reg1 = (kf 2q+8, 2q+9; col g)
//   C (16×8 f32):   c0 = (row g, col 2q), c1 = (row g, 2q+1), c2 = (g+8, 2q), c3 = (g+8, 2q+1)
// (the lower fragment index in the low 16 bits). The k order inside one MMA
// does not matter as long as A and B agree, so a group's 32 elements are
// assigned to the (step, kf) slots so that lane q needs exactly the u32 word
// q of its weight rows' 16 code bytes of the group (elements 8q…8q+7,
// element 8q+i in nibble i) and 16 contiguous bytes of its token's row:
//   step 0: kf (2q, 2q+1) ↔ elements (8q, 8q+4); kf (2q+8, 2q+9) ↔ (8q+1, 8q+5)
//   step 1: kf (2q, 2q+1) ↔ elements (8q+2, 8q+6); kf (2q+8, 2q+9) ↔ (8q+3, 8q+7)
// The code word w gives its fp16 pairs without shifting nibbles into place:
// (w & 0x000F000F) | 0x64006400 is (1024 + nibble 0, 1024 + nibble 4) and
// (w & 0x00F000F0) | 0x54005400 is (64 + nibble 1, 64 + nibble 5), both
// exact; subtracting 1024 or 64 (exact) gives the codes; w >> 8 likewise
// gives nibbles 2, 6 and 3, 7.
//
// The grouped GEMM (q4_gemm). One block of 128·WT threads per (tile of the
// table: one expert's run of at most BMT pairs, 128-row slice of that
// expert's weight): the block streams its 128 weight rows over the whole
// reduction width once, in chunks of BKG groups of 32, with cp.async into a
// STAGES-deep ring in shared memory (per chunk the rows' codes, 16 B per row
// and group, one row per lane; their bf16 deltas and mins in 4-byte copies,
// rounded to fp16 when a warp reads them; and the pairs' packed activations
// gathered by token), and every warp reuses each staged chunk for all of its
// pairs. Warp w owns weight rows 32·(w mod 4) … +31 (two m16 tiles) and
// pairs 8·TPW·(w div 4) … (TPW n8 tiles); it decodes its A fragments once
// per group and runs them against each of its n8 tiles that holds pairs.
// gate/up: the block covers output columns 64·x … +63; m16 tile j of the
// block holds the gate rows of 8 columns (rows 0–7) and their up rows
// (8–15), so c0/c2 (c1/c3) are gate and up of one (column, pair) and
// gelu(gate)·up (the common include's dgq_moe_gelu_mul) is formed in
// registers. down / dense: the block covers columns 128·x … +127, row r =
// column. The development harness (cuda/internal/dev) holds an alternative
// generation of this GEMM, built on the helpers below.

__device__ __forceinline__ u32 umin32(u32 a, u32 b) { return a < b ? a : b; }

// BEGIN PTX (the host emulation replaces everything from here to END PTX).

#define MOE_DYN_SMEM(name) extern __shared__ __align__(16) u8 name[]
#define MOE_SMEM(T, name, n) __shared__ T name[n]

struct alignas(16) v4u32 {
	u32 x, y, z, w;
};
struct alignas(16) v4f32 {
	float x, y, z, w;
};

__device__ __forceinline__ u32 smem_addr(const void* p) {
	u64 a;
	asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
	return (u32)a;
}
// cp.async of 16 bytes (L2 only) and of 4 bytes of which the first `bytes`
// (4 or 2) are read.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, u32 bytes) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void block_sync() { __syncthreads(); }

__device__ __forceinline__ u32 lds32(const u8* p) { return *(const u32*)p; }
__device__ __forceinline__ u32 lds16(const u8* p) { return *(const u16*)p; }
__device__ __forceinline__ v4u32 lds128(const u8* p) { return *(const v4u32*)p; }
__device__ __forceinline__ v4f32 ldg4f(const float* p) { return *(const v4f32*)p; }
__device__ __forceinline__ void stg4f(float* p, v4f32 v) { *(v4f32*)p = v; }
__device__ __forceinline__ void stg128(void* p, u32 x, u32 y, u32 z, u32 w) {
	v4u32 v;
	v.x = x;
	v.y = y;
	v.z = z;
	v.w = w;
	*(v4u32*)p = v;
}

// fp16x2 arithmetic, round to nearest even, subnormals kept.
__device__ __forceinline__ u32 hsub2(u32 a, u32 b) {
	u32 d;
	asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
	return d;
}
__device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c) {
	u32 d;
	asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}
// fp16x2 of (lo, hi), round to nearest even: hi in the upper half.
__device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
	u32 d;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
	return d;
}
// fp16 bits of the bf16 value with bits b (low 16 bits), round to nearest
// even (the q4 parameters' staging: see Arithmetic above), with the
// prelude's conversions.
__device__ __forceinline__ u32 bf2h(u32 b) { return F32_TO_F16(BF16_TO_F32((u16)b)); }
// bf16 of f, round to nearest even.
__device__ __forceinline__ u16 f2bf16(float f) {
	u16 h;
	asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}
__device__ __forceinline__ void mma_f16(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%0, %1, %2, %3};"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// END PTX

// moe_pack_f16: rows × kd f32 (kd % 8 == 0, rows 16-byte aligned) → dst fp16
// in the permuted run order above, scaled by 2^e per row, and inv[row] =
// 2^-e. e puts the row's largest finite |value| m in [2¹⁴, 2¹⁵) (e ≤ 126);
// e = 0 where m is 0 or not finite (NaN is ignored by the max; an infinite
// row keeps its infinities). One warp per row.
extern "C" __global__ void __launch_bounds__(256) moe_pack_f16(const float* __restrict__ src, u32 rows, u32 kd,
                                                               u16* __restrict__ dst, float* __restrict__ inv) {
	u32 lane = threadIdx.x & 31u;
	u32 nwarps = (gridDim.x * blockDim.x) >> 5;
	u32 runs = kd >> 3;
	for (u32 row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < rows; row += nwarps) {
		const float* s = src + (u64)row * kd;
		float m = 0.0f;
		for (u32 c = lane; c < runs; c += 32u) {
			v4f32 a = ldg4f(s + 8u * c), b = ldg4f(s + 8u * c + 4u);
			m = fmaxf(m, fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(a.z), fabsf(a.w))));
			m = fmaxf(m, fmaxf(fmaxf(fabsf(b.x), fabsf(b.y)), fmaxf(fabsf(b.z), fabsf(b.w))));
		}
		m = SIMD_MAX(m);
		u32 mb = __float_as_uint(m);
		int e = 0;
		if (mb != 0u && mb < 0x7f800000u) {
			int E = (int)(mb >> 23);
			e = 141 - (E == 0 ? 1 : E);
			if (e > 126) e = 126;
		}
		float sc = __uint_as_float((u32)(e + 127) << 23);
		if (lane == 0u) inv[row] = __uint_as_float((u32)(127 - e) << 23);
		u16* d = dst + (u64)row * kd;
		for (u32 c = lane; c < runs; c += 32u) {
			v4f32 a = ldg4f(s + 8u * c), b = ldg4f(s + 8u * c + 4u);
			stg128(d + 8u * c, pack_f16x2(__fmul_rn(a.x, sc), __fmul_rn(b.x, sc)),
			       pack_f16x2(__fmul_rn(a.y, sc), __fmul_rn(b.y, sc)), pack_f16x2(__fmul_rn(a.z, sc), __fmul_rn(b.z, sc)),
			       pack_f16x2(__fmul_rn(a.w, sc), __fmul_rn(b.w, sc)));
		}
	}
}

// narrow_bf16: dst[i] = bf16(src[i]) (round to nearest even) for i < n.
extern "C" __global__ void narrow_bf16(const float* __restrict__ src, u16* __restrict__ dst, u64 n) {
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
		dst[i] = f2bf16(src[i]);
	}
}

// moe_tiles_u32: the tile table of bm pairs per tile (router.kern's layout:
// tiles[0] = T, then (expert, first pair, count) per tile, experts in order)
// from the per-expert pair counts, e ≤ 1024 experts; one block of 1024
// threads.
extern "C" __global__ void __launch_bounds__(1024) moe_tiles_u32(const u32* __restrict__ counts, u32* __restrict__ tiles,
                                                                 u32 e, u32 bm) {
	MOE_SMEM(u32, so, 1024);
	MOE_SMEM(u32, st, 1024);
	u32 t = threadIdx.x;
	u32 c = t < e ? counts[t] : 0u;
	u32 nt = (c + bm - 1u) / bm;
	so[t] = c;
	st[t] = nt;
	block_sync();
	// Inclusive Hillis–Steele scans of the counts and tile counts.
	for (u32 d = 1u; d < 1024u; d <<= 1) {
		u32 a = t >= d ? so[t - d] : 0u;
		u32 b = t >= d ? st[t - d] : 0u;
		block_sync();
		so[t] += a;
		st[t] += b;
		block_sync();
	}
	u32 off = so[t] - c, toff = st[t] - nt;
	for (u32 j = 0u; j < nt; j++) {
		u32 at = 1u + 3u * (toff + j);
		tiles[at] = t;
		tiles[at + 1u] = off + j * bm;
		tiles[at + 2u] = umin32(bm, c - j * bm);
	}
	if (t == 0u) tiles[0] = st[1023];
}

// moe_combine4_f32: out[t][h] = Σ_j y[t·k + j][h] in slot order in f32 from
// 0, as router.kern's moe_combine_f32, four columns a thread (n % 4 == 0).
extern "C" __global__ void moe_combine4_f32(const float* __restrict__ y, float* __restrict__ out, u32 rows, u32 n,
                                            u32 k) {
	u32 n4 = n >> 2;
	u64 total = (u64)rows * n4;
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (u64)gridDim.x * blockDim.x) {
		u64 t = i / n4;
		u64 h = (i - t * n4) * 4u;
		const float* yr = y + t * k * n + h;
		v4f32 s;
		s.x = 0.0f;
		s.y = 0.0f;
		s.z = 0.0f;
		s.w = 0.0f;
		for (u32 j = 0u; j < k; j++) {
			v4f32 v = ldg4f(yr + (u64)j * n);
			s.x = __fadd_rn(s.x, v.x);
			s.y = __fadd_rn(s.y, v.y);
			s.z = __fadd_rn(s.z, v.z);
			s.w = __fadd_rn(s.w, v.w);
		}
		stg4f(out + t * n + h, s);
	}
}

// Modes of the q4 GEMM.
#define MODE_GATEUP 0 // z[p][n] = gelu(gate)·up, weight GateUp [E·2·nout][kd], A rows = tokens
#define MODE_DOWN 1   // y[slot][n] = acc·wts[slot], weight Down [E·nout][kd], A rows = pairs
#define MODE_DENSE 2  // c[r][n] = acc, weight [nout][kd], A rows = rows

// Weight row of block row r (0…127) and whether its column exists; a
// missing column reads row 0 of the expert's (or dense) weight instead.
template <int MODE>
__device__ __forceinline__ u64 q4_wrow(u32 r, u32 ex, u32 n0, u32 nout, bool& ok) {
	if (MODE == MODE_GATEUP) {
		u32 col = n0 + 8u * (r >> 4) + (r & 7u);
		ok = col < nout;
		col = ok ? col : 0u;
		return (u64)ex * 2u * nout + ((r & 8u) != 0u ? (u64)nout : 0u) + col;
	}
	u32 col = n0 + r;
	ok = col < nout;
	col = ok ? col : 0u;
	if (MODE == MODE_DOWN) return (u64)ex * nout + col;
	return col;
}

// Decodes code word w of one weight row with fp16 scale and bias broadcast
// to both halves (s2, b2) into the A registers of nibbles (0,4), (1,5), (2,6),
// (3,7).
__device__ __forceinline__ void q4_dq(u32 w, u32 s2, u32 b2, u32& r04, u32& r15, u32& r26, u32& r37) {
	const u32 M0 = 0x64006400u, M1 = 0x54005400u;
	r04 = hfma2(hsub2((w & 0x000F000Fu) | M0, M0), s2, b2);
	r15 = hfma2(hsub2((w & 0x00F000F0u) | M1, M1), s2, b2);
	u32 w8 = w >> 8;
	r26 = hfma2(hsub2((w8 & 0x000F000Fu) | M0, M0), s2, b2);
	r37 = hfma2(hsub2((w8 & 0x00F000F0u) | M1, M1), s2, b2);
}

// q4_fragments decodes group gi of a staged chunk sw ([group][row][16 B]
// codes) into the warp's A fragments af[rb][step][reg] for weight rows r =
// wr0 + 16·rb + g and r + 8: lane q's code word of each row, and sb(rb, h,
// scale, bias) giving the fp16x2 scale and bias of row r + 8h (broadcast to
// both halves) from wherever the generation staged them.
template <class SB>
__device__ __forceinline__ void q4_fragments(const u8* sw, u32 gi, u32 q, u32 wr0, u32 g, SB sb, u32 (&af)[2][2][4]) {
#pragma unroll
	for (int rb = 0; rb < 2; rb++) {
		u32 r = wr0 + 16u * rb + g;
		const u8* cw = sw + gi * 2048u + 4u * q;
		u32 wa = lds32(cw + r * 16u), wb = lds32(cw + (r + 8u) * 16u);
		u32 sa2, ba2, sb2, bb2;
		sb(rb, 0, sa2, ba2);
		sb(rb, 1, sb2, bb2);
		q4_dq(wa, sa2, ba2, af[rb][0][0], af[rb][0][2], af[rb][1][0], af[rb][1][2]);
		q4_dq(wb, sb2, bb2, af[rb][0][1], af[rb][0][3], af[rb][1][1], af[rb][1][3]);
	}
}

#define Q4_PARAMS                                                                                                  \
	const u8 *__restrict__ codes, const u16 *__restrict__ scales, const u16 *__restrict__ biases,               \
	    const u16 *__restrict__ A, const float *__restrict__ ainv, const u32 *__restrict__ pairs,               \
	    const u32 *__restrict__ tiles, const float *__restrict__ wts, float *__restrict__ out, u32 kd, u32 nout, \
	    u32 m, u32 topk, u32 wrows
#define Q4_ARGS codes, scales, biases, A, ainv, pairs, tiles, wts, out, kd, nout, m, topk, wrows

// q4_store: the epilogue of a warp's tiles (acc as q4_gemm's, nt tiles of
// pairs from tb): C element i of (rb, tt) is block row wr0 + 16·rb + g +
// 8·(i >> 1), pair tb + 8·tt + 2q + (i & 1).
template <int MODE, int TPW>
__device__ __forceinline__ void q4_store(const float (&acc)[2][TPW][4], u32 nt, u32 tb, u32 cnt, u32 p0, u32 n0, u32 wr0,
                                         u32 g, u32 q, const float* tinv, const u32* __restrict__ pairs,
                                         const float* __restrict__ wts, float* __restrict__ out, u32 nout) {
#pragma unroll
	for (int tt = 0; tt < TPW; tt++) {
		if ((u32)tt >= nt) continue;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			u32 t = tb + 8u * tt + 2u * q + (u32)h;
			if (t >= cnt) continue;
			float iv = tinv[t];
			if (MODE == MODE_GATEUP) {
#pragma unroll
				for (int rb = 0; rb < 2; rb++) {
					u32 col = n0 + 8u * ((wr0 >> 4) + (u32)rb) + g;
					if (col < nout)
						out[(u64)(p0 + t) * nout + col] =
						    dgq_moe_gelu_mul(__fmul_rn(acc[rb][tt][h], iv), __fmul_rn(acc[rb][tt][2 + h], iv));
				}
			} else {
				u64 orow;
				float wt = 1.0f;
				if (MODE == MODE_DOWN) {
					u32 slot = pairs[p0 + t];
					orow = slot;
					wt = wts[slot];
				} else {
					orow = p0 + t;
				}
#pragma unroll
				for (int rb = 0; rb < 2; rb++) {
#pragma unroll
					for (int hh = 0; hh < 2; hh++) {
						u32 col = n0 + wr0 + 16u * rb + g + 8u * hh;
						if (col >= nout) continue;
						float v = __fmul_rn(acc[rb][tt][2 * hh + h], iv);
						if (MODE == MODE_DOWN) v = __fmul_rn(v, wt);
						out[orow * nout + col] = v;
					}
				}
			}
		}
	}
}

// Pieces every generation of the q4 GEMM shares (the development harness
// holds another, cuda/internal/dev).

// Q4_BLOCK starts a q4 GEMM's body: it declares the pairs' rows of A and
// their scalings in shared memory (trow, tinv; q4_pair_rows fills them),
// finds the block's pairs (ex, p0, cnt: q4_block_pairs; a block past the
// end returns), and declares a thread's ids and the GEMM's sizes: tid,
// lane, warp, g = lane/4, q = lane%4; G groups of 32 over kd, nch chunks of
// BKG groups, n0 the block's first output column, rowBytes of a weight
// row's codes, halves per delta/min plane.
#define Q4_BLOCK(MODE, BMT, BKG)                                                                                   \
	MOE_SMEM(u32, trow, BMT);                                                                                  \
	MOE_SMEM(float, tinv, BMT);                                                                                \
	u32 ex, p0, cnt;                                                                                           \
	if (!q4_block_pairs<MODE, BMT>(tiles, m, ex, p0, cnt)) return;                                             \
	const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;                                            \
	const u32 g = lane >> 2, q = lane & 3u;                                                                    \
	const u32 G = kd >> 5;                                                                                     \
	const u32 nch = (G + BKG - 1u) / BKG;                                                                      \
	const u32 n0 = blockIdx.x * (MODE == MODE_GATEUP ? 64u : 128u);                                            \
	const u64 rowBytes = (u64)kd >> 1;                                                                         \
	const u64 halves = (u64)wrows * G

// q4_block_pairs finds the block's pairs: entry blockIdx.y of the tile
// table (expert ex, first pair p0, count cnt), or for MODE_DENSE the rows
// BMT·blockIdx.y … of m; false for a block past the end.
template <int MODE, int BMT>
__device__ __forceinline__ bool q4_block_pairs(const u32* __restrict__ tiles, u32 m, u32& ex, u32& p0, u32& cnt) {
	ex = 0u;
	if (MODE == MODE_DENSE) {
		p0 = blockIdx.y * (u32)BMT;
		if (p0 >= m) return false;
		cnt = umin32((u32)BMT, m - p0);
		return true;
	}
	u32 tile = blockIdx.y;
	if (tile >= tiles[0]) return false;
	ex = tiles[1u + 3u * tile];
	p0 = tiles[2u + 3u * tile];
	cnt = tiles[3u + 3u * tile];
	return true;
}

// q4_pair_rows fills trow and tinv: the row of A of each of the block's
// pairs (token pairs[p]/topk for gate/up, else the pair) and its scaling
// (0 past cnt).
template <int MODE, int BMT, int NT>
__device__ __forceinline__ void q4_pair_rows(u32* trow, float* tinv, u32 tid, u32 cnt, u32 p0, const u32* __restrict__ pairs,
                                             u32 topk, const float* __restrict__ ainv) {
	for (u32 t = tid; t < (u32)BMT; t += NT) {
		u32 row = 0u;
		float iv = 0.0f;
		if (t < cnt) {
			row = MODE == MODE_GATEUP ? pairs[p0 + t] / topk : p0 + t;
			iv = ainv[row];
		}
		trow[t] = row;
		tinv[t] = iv;
	}
}

// q4_load_a stages chunk c's activations of the block's pairs (rows trow of
// A) into sa, [group][pair][64 B]: 4·BKG 16-byte pieces a pair.
template <int BKG, int BMT, int NT>
__device__ __forceinline__ void q4_load_a(u8* sa, u32 c, u32 G, u32 tid, u32 cnt, const u32* trow, const u16* __restrict__ A,
                                          u32 kd) {
	const u32 g0 = c * BKG;
	const u32 gv = umin32(BKG, G - g0);
	constexpr int CPT = 4 * BKG; // 16-byte chunks per pair and chunk
#pragma unroll
	for (int i = 0; i < BMT * CPT / NT; i++) {
		u32 ci = tid + (u32)(i * NT);
		u32 t = ci / CPT, j = ci % CPT;
		u32 gi = j >> 2;
		if (t < cnt && gi < gv)
			cp_async16(sa + gi * (u32)(BMT * 64) + t * 64u + (j & 3u) * 16u, A + (u64)trow[t] * kd + (u64)g0 * 32u + j * 8u);
	}
}

// q4_zero clears a warp's accumulators.
template <int TPW>
__device__ __forceinline__ void q4_zero(float (&acc)[2][TPW][4]) {
#pragma unroll
	for (int rb = 0; rb < 2; rb++)
#pragma unroll
		for (int tt = 0; tt < TPW; tt++)
#pragma unroll
			for (int i = 0; i < 4; i++) acc[rb][tt][i] = 0.0f;
}

// Block geometry: 128·WT threads; warps 4 (rows) × WT (pairs); TPW n8 tiles
// of pairs per warp; BKG groups of 32 per chunk; STAGES chunks in the ring,
// each holding the chunk's codes, the rows' scale and bias words (3 a row
// and plane for BKG = 4) and the pairs' activations.
template <int WT, int TPW, int BKG, int STAGES>
struct Q4Geo {
	static constexpr int NT = 128 * WT;
	static constexpr int BMT = 8 * TPW * WT;     // pairs per block (the table's bm)
	static constexpr int SBW = BKG / 2 + 1;      // u32 words of scales (and of biases) per row and chunk
	static constexpr u32 WB = BKG * 128 * 16;    // codes: [group][row][16 B]
	static constexpr u32 SB = 128 * SBW * 4;     // one of the scale/bias planes: [row][SBW words]
	static constexpr u32 AB = BKG * BMT * 64;    // activations: [group][pair][64 B]
	static constexpr u32 STAGE = WB + 2 * SB + AB;
	static constexpr u32 SMEM = STAGE * STAGES;
};

// q4_gemm: see the file comment. codes/scales/biases: the q4 planes of a
// weight of wrows rows × kd (kd % 32 == 0); A: packed fp16 activations with
// row scalings ainv; MODE_GATEUP reads A row pairs[p]/topk for pair p,
// MODE_DOWN row p, MODE_DENSE row m0 + t (m rows, blockIdx.y = rows
// BMT·y …). out: z [pairs][nout], y [slots][nout] or c [m][nout].
template <int MODE, int WT, int TPW, int BKG, int STAGES>
__device__ __forceinline__ void q4_gemm(Q4_PARAMS) {
	typedef Q4Geo<WT, TPW, BKG, STAGES> Geo;
	constexpr int NT = Geo::NT, BMT = Geo::BMT, SBW = Geo::SBW;
	constexpr u32 WB = Geo::WB, SB = Geo::SB, STAGE = Geo::STAGE;
	MOE_DYN_SMEM(smem);
	Q4_BLOCK(MODE, BMT, BKG);
	q4_pair_rows<MODE, BMT, NT>(trow, tinv, tid, cnt, p0, pairs, topk, ainv);

	// Loader: thread tid stages weight row lr's codes (groups tid/128 + WT·j)
	// and its scale/bias words (both planes when WT = 1, plane tid/128 else).
	const u32 lr = tid & 127u;
	bool lok;
	const u64 lw = q4_wrow<MODE>(lr, ex, n0, nout, lok);
	const u8* lcode = codes + lw * rowBytes;
	const u64 lsb = lw * G;
	block_sync(); // trow

	auto load = [&](u32 c, u32 st) {
		u8* sw = smem + st * STAGE;
		u8* ss = sw + WB;
		u8* sa = ss + 2u * SB;
		const u32 g0 = c * BKG;
		const u32 gv = umin32(BKG, G - g0);
#pragma unroll
		for (int j = 0; j < BKG / WT; j++) {
			u32 gi = (tid >> 7) + (u32)(WT * j);
			if (gi < gv) cp_async16(sw + gi * 2048u + lr * 16u, lcode + (u64)(g0 + gi) * 16u);
		}
#pragma unroll
		for (int pl = 0; pl < 2; pl++) {
			if (WT == 1 || (u32)pl == (tid >> 7)) {
				const u8* base = (const u8*)(pl == 0 ? scales : biases);
				u8* d = ss + (u32)pl * SB + lr * (u32)(SBW * 4);
				u64 w0 = (lsb + g0) >> 1;
#pragma unroll
				for (int i = 0; i < SBW; i++) {
					u64 h = 2u * (w0 + (u64)i);
					if (h < halves) cp_async4(d + 4 * i, base + 2u * h, h + 1u < halves ? 4u : 2u);
				}
			}
		}
		q4_load_a<BKG, BMT, NT>(sa, c, G, tid, cnt, trow, A, kd);
	};

	// Compute lanes: rows wr0 + 16·rb + g (+8), pairs tb + 8·tt + g.
	const u32 wr0 = (warp & 3u) * 32u;
	const u32 tb = (warp >> 2) * (u32)(8 * TPW);
	const bool active = tb < cnt;
	u32 shf[2][2]; // the row's first scale/bias half in its staged words
#pragma unroll
	for (int rb = 0; rb < 2; rb++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			bool ok;
			u64 wr = q4_wrow<MODE>(wr0 + 16u * rb + g + 8u * h, ex, n0, nout, ok);
			shf[rb][h] = (u32)((wr * G) & 1u);
		}
	float acc[2][TPW][4];
	q4_zero<TPW>(acc);

#pragma unroll
	for (int s = 0; s < STAGES - 1; s++) {
		if ((u32)s < nch) load((u32)s, (u32)s);
		cp_async_commit();
	}
	for (u32 c = 0; c < nch; c++) {
		cp_async_wait<STAGES - 2>();
		block_sync();
		{
			u32 cn = c + STAGES - 1u;
			if (cn < nch) load(cn, cn % STAGES);
			cp_async_commit();
		}
		if (!active) continue;
		const u8* sw = smem + (c % STAGES) * STAGE;
		const u8* ss = sw + WB;
		const u8* sa = ss + 2u * SB;
		const u32 gv = umin32(BKG, G - c * BKG);
#pragma unroll
		for (int gi = 0; gi < BKG; gi++) {
			if ((u32)gi >= gv) break;
			u32 af[2][2][4]; // [rb][step][reg]
			// The row's scale and bias: its staged words, from its first half.
			q4_fragments(sw, (u32)gi, q, wr0, g, [&](int rb, int h, u32& s2, u32& b2) {
				const u8* sr = ss + (wr0 + 16u * rb + g + 8u * h) * (u32)(SBW * 4) + 2u * (u32)gi + 2u * shf[rb][h];
				s2 = bf2h(lds16(sr)) * 0x10001u;
				b2 = bf2h(lds16(sr + SB)) * 0x10001u;
			}, af);
			const u8* ag = sa + (u32)gi * (u32)(BMT * 64) + 16u * q;
#pragma unroll
			for (int tt = 0; tt < TPW; tt++) {
				if (tb + 8u * tt < cnt) {
					v4u32 v = lds128(ag + (tb + 8u * tt + g) * 64u);
#pragma unroll
					for (int rb = 0; rb < 2; rb++) {
						mma_f16(acc[rb][tt], af[rb][0][0], af[rb][0][1], af[rb][0][2], af[rb][0][3], v.x, v.y);
						mma_f16(acc[rb][tt], af[rb][1][0], af[rb][1][1], af[rb][1][2], af[rb][1][3], v.z, v.w);
					}
				}
			}
		}
	}
	cp_async_wait<0>();
	if (!active) return;
	const u32 nt = umin32((u32)TPW, (cnt - tb + 7u) >> 3);
	q4_store<MODE, TPW>(acc, nt, tb, cnt, p0, n0, wr0, g, q, tinv, pairs, wts, out, nout);
}

// Instances: moe_q4_gateup_<cfg>, moe_q4_down_<cfg>, q4_dense_<cfg>, grid
// (⌈nout/64⌉ for gate/up, ⌈nout/128⌉ else; tiles of the table, or ⌈m/BMT⌉),
// 128·WT threads; dynamic shared memory Q4Geo::SMEM. The Go side
// (q4Configs, cuda/moe_q4.go) mirrors the table.
#define Q4_INSTANCE(NAME, FN, WT, TPW, BKG, ST)                                                                    \
	extern "C" __global__ void __launch_bounds__(128 * WT) moe_q4_gateup_##NAME(Q4_PARAMS) {                  \
		FN<MODE_GATEUP, WT, TPW, BKG, ST>(Q4_ARGS);                                                           \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(128 * WT) moe_q4_down_##NAME(Q4_PARAMS) {                    \
		FN<MODE_DOWN, WT, TPW, BKG, ST>(Q4_ARGS);                                                             \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(128 * WT) q4_dense_##NAME(Q4_PARAMS) {                       \
		FN<MODE_DENSE, WT, TPW, BKG, ST>(Q4_ARGS);                                                            \
	}

Q4_INSTANCE(s, q4_gemm, 1, 4, 4, 3) // 32 pairs, 4 warps, 128 k a chunk, 3 stages (57 KiB)
Q4_INSTANCE(m, q4_gemm, 1, 8, 4, 4) // 64 pairs, 4 warps, 128 k a chunk, 4 stages (108 KiB)
Q4_INSTANCE(l, q4_gemm, 2, 8, 2, 4) // 128 pairs, 8 warps, 64 k a chunk, 4 stages (88 KiB)
