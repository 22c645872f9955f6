// Tiled tensor-core q4 expert GEMMs (PrecisionBF16), CUDA-specific (NVRTC,
// sm_80 or later, no includes): the default fast path of the MoE
// (cuda/moe_tiled.go; moe_mma.cu's per-warp kernels remain as the
// alternative, DGQ_MOE_KERNEL=mma).
//
// A block computes one tile of the grouped GEMM: up to 64 token-expert pairs
// of one expert (an entry of the tile table) against 64 weight rows of that
// expert, over the whole reduction width kd in steps of two q4 groups (64;
// kd % 64 == 0). Every step stages, with cp.async in a 4-deep pipeline, the
// 64 rows' 32 code bytes and two bf16 deltas and mins (the resident planar
// layout, relayout.kern), and the pairs' 64 bf16 activations into shared
// memory.
// Each of the 4 warps owns 16 weight rows (two n8 tiles) and every m16 tile
// of pairs: it decodes its B fragments from the staged codes exactly as the
// codec does (f32(code·scale) + bias), rounds them to bf16, and runs
// mma.sync m16n8k16 with f32 accumulation. The weights of a tile are read
// from memory once, whatever the number of pairs.
//
// Row mapping. gate/up (MODE 0): the block covers output columns c0 …
// c0+31 (c0 = 32·blockIdx.x); warp w's tile 0 is the gate rows of columns
// c0+8w … c0+8w+7 and tile 1 their up rows, so gelu(gate)·up is formed in
// registers. down (MODE 1): the block covers columns n0 … n0+63 (n0 =
// 64·blockIdx.x); warp w's tile t is columns n0+16w+8t … +7.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16, lane = 4g + q): A a0 = (row g, k
// 2q..2q+1), a1 = (row g+8, k 2q..), a2 = (row g, k 2q+8..), a3 = (row g+8,
// k 2q+8..); B b0 = (k 2q..2q+1, col g), b1 = (k 2q+8..2q+9, col g); C c0 =
// (row g, col 2q), c1 = (g, 2q+1), c2 = (g+8, 2q), c3 = (g+8, 2q+1); the
// lower k in the low 16 bits. q4 element 2j is the low nibble of code byte j.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define TL_M 64   // pairs per tile (the tile table's)
#define TL_N 64   // weight rows per block
#define TL_S 4    // pipeline stages
#define TL_AS 72  // bf16 per staged activation row (64 + 8: conflict-free fragment loads)
// A stage: codes [TL_N][32 B], scales [TL_N][2] and biases [TL_N][2] bf16,
// activations [TL_M][TL_AS] bf16.
#define TL_SC (TL_N * 32)
#define TL_BI (TL_SC + TL_N * 4)
#define TL_A (TL_BI + TL_N * 4)
#define TL_STAGE (TL_A + TL_M * TL_AS * 2) // bytes per stage

struct alignas(16) tl_v4 {
	u32 x, y, z, w;
};

__device__ __forceinline__ u32 smem_addr(const void* p) {
	u64 a;
	asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
	return (u32)a;
}
// 16 bytes global → shared, asynchronously; zero-filled when !ok.
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 16 : 0));
}
// 4 bytes global → shared, asynchronously; zero-filled when !ok.
__device__ __forceinline__ void cp4(void* dst, const void* src, bool ok) {
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(TL_S - 2)); }

// bf16 bits → f32 (exact).
__device__ __forceinline__ float tl_bf16(u32 h) { return __uint_as_float((h & 0xffffu) << 16); }
__device__ __forceinline__ u32 tl_bf16x2(float lo, float hi) {
	u32 d;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
	return d;
}
// The two elements of code byte b, decoded as the codec does, as bf16x2.
__device__ __forceinline__ u32 tl_deq2(u32 b, float sc, float bi) {
	float lo = __fadd_rn(__fmul_rn((float)(b & 15u), sc), bi);
	float hi = __fadd_rn(__fmul_rn((float)((b >> 4) & 15u), sc), bi);
	return tl_bf16x2(lo, hi);
}
__device__ __forceinline__ void tl_mma(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%0, %1, %2, %3};"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float tl_gelu_mul(float g, float u) {
	float g3 = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
	float y = __fmul_rn(0.7978845608028654f, __fadd_rn(g, g3));
	float gel = g / __fadd_rn(1.0f, expf(__fmul_rn(-2.0f, y)));
	return __fmul_rn(gel, u);
}

// Output column of block row r (< TL_N) and its weight row; ok false past
// nout.
template <int MODE>
__device__ __forceinline__ u64 tl_wrow(u32 r, u32 ex, u32 nout, bool& ok) {
	u32 w = r >> 4, t = (r >> 3) & 1u, i = r & 7u;
	if (MODE == 0) {
		u32 col = 32u * blockIdx.x + 8u * w + i;
		ok = col < nout;
		return (u64)ex * 2u * nout + (u64)t * nout + (ok ? col : 0u);
	}
	u32 col = 64u * blockIdx.x + r;
	ok = col < nout;
	return (u64)ex * nout + (ok ? col : 0u);
}

template <int MODE>
__device__ __forceinline__ void tl_kernel(const u8* __restrict__ codes, const u16* __restrict__ scales,
                                          const u16* __restrict__ biases, const u16* __restrict__ A,
                                          const u32* __restrict__ pairs, const u32* __restrict__ tiles,
                                          const float* __restrict__ wts, float* __restrict__ out, u32 kd, u32 nout) {
	extern __shared__ tl_v4 smem_v4[]; // 16-byte aligned
	u8* smem = (u8*)smem_v4;
	const u32 tile = blockIdx.y;
	if (tile >= tiles[0]) return;
	const u32 ex = tiles[1u + 3u * tile], p0 = tiles[2u + 3u * tile], cnt = tiles[3u + 3u * tile];
	if (cnt == 0u) return;
	const u32 G = kd >> 5, NS = kd >> 6;
	const u32 tid = threadIdx.x, warp = tid >> 5, lane = tid & 31u, g = lane >> 2, q = lane & 3u;
	u8* stages = smem;

	// Stage loader: reduction step ks (groups 2ks, 2ks+1) into stage s.
	const u64 rowBytes = kd >> 1;
	auto load = [&](u32 s, u32 ks) {
		u8* st = stages + s * TL_STAGE;
		u16* sa = (u16*)(st + TL_A);
		for (u32 i = tid; i < 2u * TL_N; i += blockDim.x) {
			u32 r = i >> 1, c = i & 1u;
			bool ok;
			u64 wr = tl_wrow<MODE>(r, ex, nout, ok);
			cp16(st + 32u * r + 16u * c, codes + wr * rowBytes + 32u * ks + 16u * c, ok);
		}
		for (u32 i = tid; i < 2u * TL_N; i += blockDim.x) {
			u32 r = i >> 1;
			bool ok;
			u64 wr = tl_wrow<MODE>(r, ex, nout, ok);
			if (i & 1u) cp4(st + TL_BI + 4u * r, biases + wr * G + 2u * ks, ok);
			else cp4(st + TL_SC + 4u * r, scales + wr * G + 2u * ks, ok);
		}
		for (u32 i = tid; i < TL_M * 8u; i += blockDim.x) {
			u32 r = i >> 3, c = i & 7u;
			bool ok = r < cnt;
			cp16(sa + r * TL_AS + 8u * c, A + (u64)(ok ? p0 + r : p0) * kd + 64u * ks + 8u * c, ok);
		}
	};

	const u32 mts = (cnt + 15u) >> 4;
	float acc[4][2][4];
#pragma unroll
	for (int m = 0; m < 4; m++)
#pragma unroll
		for (int t = 0; t < 2; t++)
#pragma unroll
			for (int i = 0; i < 4; i++) acc[m][t][i] = 0.0f;

#pragma unroll
	for (u32 s = 0; s < TL_S - 1; s++) {
		if (s < NS) load(s, s);
		cp_commit();
	}
	for (u32 ks = 0; ks < NS; ks++) {
		cp_wait();
		__syncthreads();
		u32 nx = ks + TL_S - 1;
		if (nx < NS) load(nx % TL_S, nx);
		cp_commit();

		const u8* st = stages + (ks % TL_S) * TL_STAGE;
		const u16* sa = (const u16*)(st + TL_A);
		u32 b[2][4][2]; // [tile][k16 step][reg]
#pragma unroll
		for (int t = 0; t < 2; t++) {
			u32 r = 16u * warp + 8u * t + g;
			tl_v4 c0 = *(const tl_v4*)(st + 32u * r);
			tl_v4 c1 = *(const tl_v4*)(st + 32u * r + 16u);
			u32 scw = *(const u32*)(st + TL_SC + 4u * r), biw = *(const u32*)(st + TL_BI + 4u * r);
			float sc0 = tl_bf16(scw), sc1 = tl_bf16(scw >> 16);
			float bi0 = tl_bf16(biw), bi1 = tl_bf16(biw >> 16);
			u32 sh = 8u * q;
			b[t][0][0] = tl_deq2(c0.x >> sh, sc0, bi0);
			b[t][0][1] = tl_deq2(c0.y >> sh, sc0, bi0);
			b[t][1][0] = tl_deq2(c0.z >> sh, sc0, bi0);
			b[t][1][1] = tl_deq2(c0.w >> sh, sc0, bi0);
			b[t][2][0] = tl_deq2(c1.x >> sh, sc1, bi1);
			b[t][2][1] = tl_deq2(c1.y >> sh, sc1, bi1);
			b[t][3][0] = tl_deq2(c1.z >> sh, sc1, bi1);
			b[t][3][1] = tl_deq2(c1.w >> sh, sc1, bi1);
		}
#pragma unroll
		for (int m = 0; m < 4; m++) {
			if ((u32)m >= mts) continue;
#pragma unroll
			for (int kk = 0; kk < 4; kk++) {
				const u16* r0 = sa + (16u * m + g) * TL_AS + 16u * kk + 2u * q;
				const u16* r1 = r0 + 8u * TL_AS;
				u32 a0 = *(const u32*)r0, a1 = *(const u32*)r1;
				u32 a2 = *(const u32*)(r0 + 8), a3 = *(const u32*)(r1 + 8);
#pragma unroll
				for (int t = 0; t < 2; t++) tl_mma(acc[m][t], a0, a1, a2, a3, b[t][kk][0], b[t][kk][1]);
			}
		}
	}
	cp_wait(); // nothing may stay in flight into a finished block's shared memory
	asm volatile("cp.async.wait_all;");

#pragma unroll
	for (int m = 0; m < 4; m++) {
#pragma unroll
		for (int i = 0; i < 4; i++) {
			u32 row = 16u * m + g + 8u * (i >> 1);
			if ((u32)m >= mts || row >= cnt) continue;
			u32 j = 2u * q + (i & 1u);
			if (MODE == 0) {
				u32 col = 32u * blockIdx.x + 8u * warp + j;
				if (col < nout) out[(u64)(p0 + row) * nout + col] = tl_gelu_mul(acc[m][0][i], acc[m][1][i]);
			} else {
				u32 slot = pairs[p0 + row];
				float wt = wts[slot];
#pragma unroll
				for (int t = 0; t < 2; t++) {
					u32 col = 64u * blockIdx.x + 16u * warp + 8u * t + j;
					if (col < nout) out[(u64)slot * nout + col] = __fmul_rn(acc[m][t][i], wt);
				}
			}
		}
	}
}

#define TL_PARAMS                                                                                                  \
	const u8 *__restrict__ codes, const u16 *__restrict__ scales, const u16 *__restrict__ biases,               \
	    const u16 *__restrict__ A, const u32 *__restrict__ pairs, const u32 *__restrict__ tiles,                \
	    const float *__restrict__ wts, float *__restrict__ out, u32 kd, u32 nout
#define TL_ARGS codes, scales, biases, A, pairs, tiles, wts, out, kd, nout

// moe_tl_gateup: z [pairs][nout] = gelu(a·gateᵀ)·(a·upᵀ), a the pairs'
// activations [pairs][kd] bf16 (kd % 64 == 0); grid (⌈nout/32⌉, tiles),
// 128 threads, dynamic shared memory TL_S·TL_STAGE bytes.
extern "C" __global__ void __launch_bounds__(128) moe_tl_gateup(TL_PARAMS) { tl_kernel<0>(TL_ARGS); }

// moe_tl_down: y [slots][nout] = (a·downᵀ)·wts[slot], a = z [pairs][kd]
// bf16; grid (⌈nout/64⌉, tiles), 128 threads, shared memory as above.
extern "C" __global__ void __launch_bounds__(128) moe_tl_down(TL_PARAMS) { tl_kernel<1>(TL_ARGS); }

// moe_gather_bf16: dst[p][k] = bf16(src[row][k]) for p < rows, k < kd (kd
// even), row = pairs[p]/topk when topk > 0 (the token of a pair), else p.
extern "C" __global__ void moe_gather_bf16(const float* __restrict__ src, const u32* __restrict__ pairs, u32 topk,
                                           u32 rows, u32 kd, u16* __restrict__ dst) {
	u64 n = (u64)rows * (kd >> 1);
	for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
		u64 e = 2u * i;
		u32 row = (u32)(e / kd), k = (u32)(e - (u64)row * kd);
		u64 srow = topk > 0u ? (u64)(pairs[row] / topk) : (u64)row;
		const float* s = src + srow * kd + k;
		*(u32*)(dst + e) = tl_bf16x2(s[0], s[1]);
	}
}
