// dgq kernel dialect: the CUDA prelude (compiled with NVRTC, no includes).
// A translation unit is this file, the dialect's common include
// (runtime/kernels/common.h), then one kernel file. docs/cuda.md describes
// the dialect; a Metal prelude defines the same names.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

// Kernel declaration: KERNEL(name, params...) where each parameter is one of
// BUF (read-write device array), CBUF (read-only device array) or SCALAR
// (by value). The last argument of BUF/CBUF/SCALAR is the Metal buffer index.
#define KERNEL(name, ...) extern "C" __global__ void name(__VA_ARGS__)
#define BUF(T, name, idx) T* __restrict__ name
#define CBUF(T, name, idx) const T* __restrict__ name
#define SCALAR(T, name, idx) T name

// Qualifiers for helper functions and pointers inside them.
#define INLINE __device__ __forceinline__ static
#define DEVICE_MEM
#define THREADGROUP_MEM
#define THREAD_MEM

// Thread geometry (x dimension; _Y/_Z likewise).
#define LOCAL_ID_X threadIdx.x
#define LOCAL_ID_Y threadIdx.y
#define LOCAL_ID_Z threadIdx.z
#define GROUP_ID_X blockIdx.x
#define GROUP_ID_Y blockIdx.y
#define GROUP_ID_Z blockIdx.z
#define LOCAL_SIZE_X blockDim.x
#define LOCAL_SIZE_Y blockDim.y
#define LOCAL_SIZE_Z blockDim.z
#define NUM_GROUPS_X gridDim.x
#define NUM_GROUPS_Y gridDim.y
#define GLOBAL_ID_X (blockIdx.x * blockDim.x + threadIdx.x)
#define GLOBAL_ID_Y (blockIdx.y * blockDim.y + threadIdx.y)
#define GLOBAL_SIZE_X (gridDim.x * blockDim.x)

// Group-shared memory: SHARED(T, name, n) declares T name[n] in a kernel body.
#define SHARED(T, name, n) __shared__ T name[n]
#define BARRIER() __syncthreads()

// SIMD groups (warps) of SIMD_WIDTH lanes.
#define SIMD_WIDTH 32
#define LANE_ID (threadIdx.x & 31u)
#define SIMD_ID (threadIdx.x >> 5)
INLINE float dgq_simd_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
INLINE float dgq_simd_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}
#define SIMD_SUM(v) dgq_simd_sum(v)
#define SIMD_MAX(v) dgq_simd_max(v)

// Math. Plain + - * / may be contracted into fused multiply-adds; where a
// kernel must round each step (bit-exact decoders), it uses MUL_RN/ADD_RN.
#define MUL_RN(a, b) __fmul_rn((a), (b))
#define ADD_RN(a, b) __fadd_rn((a), (b))
#define FMA(a, b, c) fmaf((a), (b), (c))
#define SQRT(x) sqrtf(x)
#define RSQRT(x) rsqrtf(x)
#define EXP(x) expf(x)
#define LOG(x) logf(x)
#define TANH(x) tanhf(x)
#define COS(x) cosf(x)
#define SIN(x) sinf(x)
#define FMAX(a, b) fmaxf((a), (b))
#define FMIN(a, b) fminf((a), (b))
#define FABS(x) fabsf(x)

// Bit casts and half-precision conversions (values carried as u16 bits).
#define AS_FLOAT(u) __uint_as_float(u)
#define AS_UINT(f) __float_as_uint(f)
INLINE float dgq_f16_to_f32(u16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
INLINE u16 dgq_f32_to_f16(float f) {
	u16 h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}
INLINE float dgq_bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }
INLINE u16 dgq_f32_to_bf16(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u); // quiet NaN
	return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 // round to nearest even
}
#define F16_TO_F32(h) dgq_f16_to_f32(h)
#define F32_TO_F16(f) dgq_f32_to_f16(f)
#define BF16_TO_F32(b) dgq_bf16_to_f32(b)
#define F32_TO_BF16(f) dgq_f32_to_bf16(f)
