// Fast (PrecisionBF16) kernels of the CUDA backend: q4 grouped expert GEMMs
// on the tensor cores (mma.sync m16n8k16 bf16, f32 accumulation) and the
// bf16 packing of their activations. CUDA-specific (NVRTC, sm_80 or later,
// no includes); docs/cuda.md, "MoE", describes the design.
//
// Arithmetic. A q4 weight is w = f32(code·scale) + bias per group of 32
// (docs/codecs.md). The kernels feed the exact codes (0…15, exact in bf16)
// to the tensor cores and apply the group's scale and bias in f32:
//
//   Σ_k a_k·w_k = Σ_groups ( scale·Σ_{k∈g} a_k·code_k + bias·Σ_{k∈g} a_k )
//
// with a_k the activation rounded to bf16. Per group each thread runs two
// k16 MMAs from zero into a partial tile, then acc += scale·part and
// acc += bias·asum (asum = Σ_{k∈g} bf16(a_k), computed when packing). So the
// only rounding beyond f32 is that of the activations to bf16.
//
// Packed activations. Rows of kd bf16 values; within every run of 8
// (elements 8c…8c+7) they are stored in the order 0,4,1,5,2,6,3,7, so that
// the 16 bytes a thread loads for its k-slice are, as four u32, exactly its
// A-fragment registers of the two k16 steps of a group (below). asum is
// [rows][kd/32] f32.
//
// Fragment mapping (PTX ISA, mma.m16n8k16, .bf16): lane = 4·g + q.
//   A (16×16, row): reg0 = (row g, kf 2q, 2q+1), reg1 = (row g+8, kf 2q, 2q+1),
//                   reg2 = (row g, kf 2q+8, 2q+9), reg3 = (row g+8, kf 2q+8, 2q+9)
//   B (16×8, col):  reg0 = (kf 2q, 2q+1; col g), reg1 = (kf 2q+8, 2q+9; col g)
//   C (16×8 f32):   c0 = (row g, col 2q), c1 = (row g, 2q+1), c2 = (g+8, 2q), c3 = (g+8, 2q+1)
// (the lower fragment index in the low 16 bits). The k order inside one MMA
// does not matter as long as A and B agree, so a group's 32 elements are
// assigned to the (step, kf) slots so that thread q needs exactly the u32
// word q of the group's 16 code bytes of its weight row (elements 8q…8q+7,
// element 8q+i in nibble i) and 16 contiguous bytes of each activation row:
//   step 0: kf (2q, 2q+1) ↔ elements (8q, 8q+4); kf (2q+8, 2q+9) ↔ (8q+1, 8q+5)
//   step 1: kf (2q, 2q+1) ↔ elements (8q+2, 8q+6); kf (2q+8, 2q+9) ↔ (8q+3, 8q+7)
// The code word w gives B registers by ((w >> 4i) & 0x000F000F) | 0x43004300
// (bf16 128 + nibble i in the low half, 128 + nibble i+4 in the high half)
// minus 128 (an exact bf16x2 FMA): i = 0, 1 for step 0, i = 2, 3 for step 1.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define MOE_BM 64 // pairs per tile (the tile table's)
#define MOE_NW 4  // warps per block
#define MOE_CG 8  // groups of 32 per prefetched chunk of code words

__device__ __forceinline__ u32 umin32(u32 a, u32 b) { return a < b ? a : b; }

// Memory and inline-PTX helpers (all of the file's PTX is here, from ldg128 to
// mma16816).

// Read-only global loads (the kernels' inputs are not written while they
// run; with __restrict__ the compiler may use the non-coherent path).
struct alignas(16) v4u32 {
	u32 x, y, z, w;
};
__device__ __forceinline__ void ldg128(const void* p, u32& x, u32& y, u32& z, u32& w) {
	v4u32 v = *(const v4u32*)p;
	x = v.x;
	y = v.y;
	z = v.z;
	w = v.w;
}
__device__ __forceinline__ u32 ldg32(const void* p) { return *(const u32*)p; }
__device__ __forceinline__ u16 ldg16(const void* p) { return *(const u16*)p; }
__device__ __forceinline__ void stg128(void* p, u32 x, u32 y, u32 z, u32 w) {
	asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
__device__ __forceinline__ float f16f(u16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
// bf16x2 of (lo, hi), round to nearest even: hi in the upper half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
	u32 d;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
	return d;
}
// bf16 of f, round to nearest even.
__device__ __forceinline__ u16 f2bf16(float f) {
	u16 h;
	asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}
__device__ __forceinline__ float bf16lo(u32 v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16hi(u32 v) { return __uint_as_float(v & 0xffff0000u); }

// Nibbles 0 and 4 of w as exact bf16x2 (nibble 0 in the low half).
__device__ __forceinline__ u32 q4pair(u32 w) {
	u32 t = (w & 0x000F000Fu) | 0x43004300u;
	u32 d;
	asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(t), "r"(0x3F803F80u), "r"(0xC300C300u));
	return d;
}

__device__ __forceinline__ void mma16816(float& d0, float& d1, float& d2, float& d3, u32 a0, u32 a1, u32 a2, u32 a3,
                                         u32 b0, u32 b1) {
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%0, %1, %2, %3};"
	    : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
	    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// gelu(g)·u as router.kern's moe_gelu_mul.
__device__ __forceinline__ float gelu_mul(float g, float u) {
	float g3 = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
	float y = __fmul_rn(0.7978845608028654f, __fadd_rn(g, g3));
	float gel = g / __fadd_rn(1.0f, expf(__fmul_rn(-2.0f, y)));
	return __fmul_rn(gel, u);
}

// moe_pack_bf16: rows × kd f32 (kd % 32 == 0) → packed bf16 (dst, the
// permuted order above) and group sums (sums [rows][kd/32]). Source row of
// row p: pairs[p]/topk when topk > 0 (the token of a pair), else p. One
// thread per run of 8; the 4 runs of a group are 4 consecutive lanes.
extern "C" __global__ void moe_pack_bf16(const float* __restrict__ src, const u32* __restrict__ pairs, u32 topk,
                                         u32 rows, u32 kd, u16* __restrict__ dst, float* __restrict__ sums) {
	u32 runs = kd >> 3;
	u64 total = (u64)rows * runs;
	u64 stride = (u64)gridDim.x * blockDim.x;
	for (u64 base = (u64)blockIdx.x * blockDim.x; base < total; base += stride) {
		u64 i = base + threadIdx.x;
		bool ok = i < total;
		u32 row = 0, c = 0;
		float x[8];
		for (int j = 0; j < 8; j++) x[j] = 0.0f;
		if (ok) {
			row = (u32)(i / runs);
			c = (u32)(i - (u64)row * runs);
			u64 srow = topk > 0u ? (u64)(pairs[row] / topk) : (u64)row;
			const float* s = src + srow * kd + 8u * c;
			for (int j = 0; j < 8; j++) x[j] = s[j];
		}
		u32 w0 = pack_bf16x2(x[0], x[4]);
		u32 w1 = pack_bf16x2(x[1], x[5]);
		u32 w2 = pack_bf16x2(x[2], x[6]);
		u32 w3 = pack_bf16x2(x[3], x[7]);
		float sum = ((bf16lo(w0) + bf16hi(w0)) + (bf16lo(w1) + bf16hi(w1))) +
		            ((bf16lo(w2) + bf16hi(w2)) + (bf16lo(w3) + bf16hi(w3)));
		sum += __shfl_xor_sync(0xffffffffu, sum, 1);
		sum += __shfl_xor_sync(0xffffffffu, sum, 2);
		if (ok) {
			stg128(dst + (u64)row * kd + 8u * c, w0, w1, w2, w3);
			if ((c & 3u) == 0u) sums[(u64)row * (kd >> 5) + (c >> 2)] = sum;
		}
	}
}

// narrow_bf16: dst[i] = bf16(src[i]) (round to nearest even) for i < n.
extern "C" __global__ void narrow_bf16(const float* __restrict__ src, u16* __restrict__ dst, u64 n) {
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
		dst[i] = f2bf16(src[i]);
	}
}

// Modes of the q4 GEMM.
#define MODE_GATEUP 0 // z[p][n] = gelu(gate)·up, weight GateUp [E·2·nout][kd]
#define MODE_DOWN 1   // y[slot][n] = acc·wts[slot], weight Down [E·nout][kd]
#define MODE_DENSE 2  // c[r][n] = acc, weight [nout][kd]

// Weight row of output column n in n8 tile t of a warp.
template <int MODE>
__device__ __forceinline__ u64 wrow(u32 t, u32 ex, u32 n, u32 nout) {
	if (MODE == MODE_GATEUP) return (u64)ex * 2u * nout + (u64)t * nout + n;
	if (MODE == MODE_DOWN) return (u64)ex * nout + n;
	return n;
}

// One group of 32 of q4_warp: w0, w1 are the code words of the thread's two
// B rows. Branch-free: a padding row (past cnt) or column (past nout) loads
// valid memory (row p0, weight row 0) and is zeroed.
template <int MT>
__device__ __forceinline__ void q4_group(u32 gi, u32 w0, u32 w1, const u16* __restrict__ scales,
                                         const u16* __restrict__ biases, const u64 (&srow)[2][2],
                                         const bool (&sok)[2][2], const u16* const (&arow)[MT][2],
                                         const float* const (&srowA)[MT][2], const bool (&aok)[MT][2],
                                         float (&acc)[MT][2][4]) {
	float sc[2][2], bi[2][2];
#pragma unroll
	for (int t = 0; t < 2; t++)
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float sv = f16f(ldg16(scales + srow[t][h] + gi));
			float bv = f16f(ldg16(biases + srow[t][h] + gi));
			sc[t][h] = sok[t][h] ? sv : 0.0f;
			bi[t][h] = sok[t][h] ? bv : 0.0f;
		}
	u32 bq[2][4];
#pragma unroll
	for (int t = 0; t < 2; t++) {
		u32 w = t == 0 ? w0 : w1;
		bq[t][0] = q4pair(w);
		bq[t][1] = q4pair(w >> 4);
		bq[t][2] = q4pair(w >> 8);
		bq[t][3] = q4pair(w >> 12);
	}
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
		u32 a0[4], a1[4];
		ldg128(arow[mt][0] + 32u * (u64)gi, a0[0], a0[1], a0[2], a0[3]);
		ldg128(arow[mt][1] + 32u * (u64)gi, a1[0], a1[1], a1[2], a1[3]);
		float s0 = srowA[mt][0][gi], s1 = srowA[mt][1][gi];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			a0[j] = aok[mt][0] ? a0[j] : 0u;
			a1[j] = aok[mt][1] ? a1[j] : 0u;
		}
		s0 = aok[mt][0] ? s0 : 0.0f;
		s1 = aok[mt][1] ? s1 : 0.0f;
#pragma unroll
		for (int t = 0; t < 2; t++) {
			float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
			mma16816(d0, d1, d2, d3, a0[0], a1[0], a0[1], a1[1], bq[t][0], bq[t][1]);
			mma16816(d0, d1, d2, d3, a0[2], a1[2], a0[3], a1[3], bq[t][2], bq[t][3]);
			acc[mt][t][0] = fmaf(sc[t][0], d0, fmaf(bi[t][0], s0, acc[mt][t][0]));
			acc[mt][t][1] = fmaf(sc[t][1], d1, fmaf(bi[t][1], s0, acc[mt][t][1]));
			acc[mt][t][2] = fmaf(sc[t][0], d2, fmaf(bi[t][0], s1, acc[mt][t][2]));
			acc[mt][t][3] = fmaf(sc[t][1], d3, fmaf(bi[t][1], s1, acc[mt][t][3]));
		}
	}
}

// One warp: pairs p0 … p0+cnt−1 (cnt ≤ 16·MT) against two n8 tiles of
// weight rows over the whole reduction dimension kd (kd % 32 == 0).
// MODE_GATEUP: tile 0 = gate rows, tile 1 = up rows of output columns
// nbase … nbase+7; otherwise tile t = output columns nbase + 8t … +7.
template <int MT, int MODE>
__device__ __forceinline__ void q4_warp(const u8* __restrict__ codes, const u16* __restrict__ scales,
                                        const u16* __restrict__ biases, const u16* __restrict__ A,
                                        const float* __restrict__ asum, u32 kd, u32 nout, u32 ex, u32 p0, u32 cnt,
                                        const u32* __restrict__ pairs, const float* __restrict__ wts,
                                        float* __restrict__ out, u32 nbase, u32 lane) {
	const u32 g = lane >> 2, q = lane & 3u;
	const u32 G = kd >> 5;
	const u64 rowBytes = kd >> 1;
	// B rows (column g of each n8 tile) and the weight rows of the thread's C
	// columns 2q, 2q+1.
	const u8* bptr[2];
	bool bok[2];
	u64 srow[2][2];
	bool sok[2][2];
#pragma unroll
	for (int t = 0; t < 2; t++) {
		u32 col0 = MODE == MODE_GATEUP ? nbase : nbase + 8u * t;
		u32 nb = col0 + g;
		bok[t] = nb < nout;
		bptr[t] = codes + (bok[t] ? wrow<MODE>(t, ex, nb, nout) * rowBytes : 0) + 4u * q;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			u32 nc = col0 + 2u * q + h;
			sok[t][h] = nc < nout;
			srow[t][h] = sok[t][h] ? wrow<MODE>(t, ex, nc, nout) * G : 0;
		}
	}
	// Activation rows of the thread: r = 16·mt + g and r + 8.
	const u16* arow[MT][2];
	const float* srowA[MT][2];
	bool aok[MT][2];
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
#pragma unroll
		for (int h = 0; h < 2; h++) {
			u32 r = 16u * mt + g + 8u * h;
			aok[mt][h] = r < cnt;
			u64 pr = aok[mt][h] ? (u64)(p0 + r) : (u64)p0;
			arow[mt][h] = A + pr * kd + 8u * q;
			srowA[mt][h] = asum + pr * G;
		}
	}
	float acc[MT][2][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int t = 0; t < 2; t++)
#pragma unroll
			for (int i = 0; i < 4; i++) acc[mt][t][i] = 0.0f;

	u32 cw[2][MOE_CG];
#pragma unroll
	for (int t = 0; t < 2; t++)
#pragma unroll
		for (int u = 0; u < MOE_CG; u++) cw[t][u] = (bok[t] && (u32)u < G) ? ldg32(bptr[t] + 16u * u) : 0u;

	for (u32 gc = 0; gc < G; gc += MOE_CG) {
		// Prefetch the next chunk's code words.
		u32 nw[2][MOE_CG];
#pragma unroll
		for (int t = 0; t < 2; t++)
#pragma unroll
			for (int u = 0; u < MOE_CG; u++) {
				u32 gi = gc + MOE_CG + u;
				nw[t][u] = (bok[t] && gi < G) ? ldg32(bptr[t] + 16u * (u64)gi) : 0u;
			}
		if (gc + MOE_CG <= G) {
#pragma unroll
			for (int u = 0; u < MOE_CG; u++) q4_group<MT>(gc + u, cw[0][u], cw[1][u], scales, biases, srow, sok, arow, srowA, aok, acc);
		} else {
#pragma unroll
			for (int u = 0; u < MOE_CG; u++)
				if (gc + u < G) q4_group<MT>(gc + u, cw[0][u], cw[1][u], scales, biases, srow, sok, arow, srowA, aok, acc);
		}
#pragma unroll
		for (int t = 0; t < 2; t++)
#pragma unroll
			for (int u = 0; u < MOE_CG; u++) cw[t][u] = nw[t][u];
	}

	// Epilogue: C element i of tile t is row 16·mt + g + 8·(i >> 1), column
	// col0 + 2q + (i & 1).
#pragma unroll
	for (int mt = 0; mt < MT; mt++) {
#pragma unroll
		for (int i = 0; i < 4; i++) {
			u32 r = 16u * mt + g + 8u * (i >> 1);
			if (r >= cnt) continue;
			if (MODE == MODE_GATEUP) {
				u32 n = nbase + 2u * q + (i & 1);
				if (n < nout) out[(u64)(p0 + r) * nout + n] = gelu_mul(acc[mt][0][i], acc[mt][1][i]);
			} else if (MODE == MODE_DOWN) {
				u32 slot = pairs[p0 + r];
				float wt = wts[slot];
#pragma unroll
				for (int t = 0; t < 2; t++) {
					u32 n = nbase + 8u * t + 2u * q + (i & 1);
					if (n < nout) out[(u64)slot * nout + n] = __fmul_rn(acc[mt][t][i], wt);
				}
			} else {
#pragma unroll
				for (int t = 0; t < 2; t++) {
					u32 n = nbase + 8u * t + 2u * q + (i & 1);
					if (n < nout) out[(u64)(p0 + r) * nout + n] = acc[mt][t][i];
				}
			}
		}
	}
}

// Block: MOE_NW warps, each its own columns (8 for MODE_GATEUP, 16
// otherwise) of block column GROUP x; blockIdx.y is the tile (of the table,
// or rows 64·y … for MODE_DENSE with m rows). A warp past nout, or a block
// past the table's tile count, returns (no barriers in these kernels).
template <int MODE>
__device__ __forceinline__ void q4_block(const u8* __restrict__ codes, const u16* __restrict__ scales,
                                         const u16* __restrict__ biases, const u16* __restrict__ A,
                                         const float* __restrict__ asum, const u32* __restrict__ pairs,
                                         const u32* __restrict__ tiles, const float* __restrict__ wts,
                                         float* __restrict__ out, u32 kd, u32 nout, u32 m) {
	u32 ex, p0, cnt;
	if (MODE == MODE_DENSE) {
		ex = 0;
		p0 = blockIdx.y * MOE_BM;
		if (p0 >= m) return;
		cnt = umin32(MOE_BM, m - p0);
	} else {
		u32 tile = blockIdx.y;
		if (tile >= tiles[0]) return;
		ex = tiles[1u + 3u * tile];
		p0 = tiles[2u + 3u * tile];
		cnt = tiles[3u + 3u * tile];
	}
	u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
	u32 cols = MODE == MODE_GATEUP ? 8u : 16u;
	u32 nbase = (blockIdx.x * MOE_NW + warp) * cols;
	if (nbase >= nout || cnt == 0u) return;
	u32 mts = (cnt + 15u) >> 4;
	if (mts == 1u)
		q4_warp<1, MODE>(codes, scales, biases, A, asum, kd, nout, ex, p0, cnt, pairs, wts, out, nbase, lane);
	else if (mts == 2u)
		q4_warp<2, MODE>(codes, scales, biases, A, asum, kd, nout, ex, p0, cnt, pairs, wts, out, nbase, lane);
	else if (mts == 3u)
		q4_warp<3, MODE>(codes, scales, biases, A, asum, kd, nout, ex, p0, cnt, pairs, wts, out, nbase, lane);
	else
		q4_warp<4, MODE>(codes, scales, biases, A, asum, kd, nout, ex, p0, cnt, pairs, wts, out, nbase, lane);
}

#define Q4_PARAMS                                                                                               \
	const u8 *__restrict__ codes, const u16 *__restrict__ scales, const u16 *__restrict__ biases,            \
	    const u16 *__restrict__ A, const float *__restrict__ asum, const u32 *__restrict__ pairs,            \
	    const u32 *__restrict__ tiles, const float *__restrict__ wts, float *__restrict__ out, u32 kd, u32 nout, \
	    u32 m
#define Q4_ARGS codes, scales, biases, A, asum, pairs, tiles, wts, out, kd, nout, m

// moe_q4_gateup: z [pairs][nout] = gelu(u·gateᵀ)·(u·upᵀ) per tile of the
// table; grid (⌈nout/32⌉, max tiles), 128 threads.
extern "C" __global__ void __launch_bounds__(128) moe_q4_gateup(Q4_PARAMS) { q4_block<MODE_GATEUP>(Q4_ARGS); }

// moe_q4_down: y [slots][nout] = (z·downᵀ)·wts[slot]; grid (⌈nout/64⌉, max
// tiles), 128 threads.
extern "C" __global__ void __launch_bounds__(128) moe_q4_down(Q4_PARAMS) { q4_block<MODE_DOWN>(Q4_ARGS); }

// q4_dense: c [m][nout] = a·wᵀ; grid (⌈nout/64⌉, ⌈m/64⌉), 128 threads.
extern "C" __global__ void __launch_bounds__(128) q4_dense(Q4_PARAMS) { q4_block<MODE_DENSE>(Q4_ARGS); }
