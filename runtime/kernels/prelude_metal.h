#line 2 "prelude_metal.h"
// dgq kernel dialect: the Metal prelude (Metal Shading Language 3, the source
// a Metal device compiles at run time). A translation unit is this file, the
// dialect's common include (runtime/kernels/common.h), then one kernel file.
// docs/cuda.md describes the dialect; prelude_cuda.h maps the same names to
// CUDA.
//
// Floating-point control. The kernels rely on IEEE f32 (bit-exact
// decoders, NaN kept, the correctly rounded division of Temper and Softcap),
// so a unit is compiled in Safe math mode with the precise math functions
// and never in Metal's default fast mode, which may reassociate, flush and
// approximate. Safe mode still lets the compiler fuse a*b + c within a
// statement (MSL §1.6.3: it "sets the FP contract to on"), so the products
// and sums the contract makes exact go through MUL_RN and ADD_RN, whose
// bodies turn contraction off. How that is said depends on the compiler:
// a unit starts with the header of the device engine's compile plan
// (metal.CompilePlan), which defines DGQ_NO_CONTRACT as the pragmas that
// compiler honours — the standard `STDC FP_CONTRACT OFF` always, and
// `METAL fp contract(off)` where Apple's compiler knows it (macOS 15 and
// later, which also gets `METAL fp math_mode(safe)` at file scope) — and
// the MSL check compiles every unit under every plan and fails when one of
// those pragmas does not reach the helpers.
#ifndef DGQ_NO_CONTRACT
#error "a Metal unit starts with its compile plan's header (metal.CompilePlan.Header), which defines DGQ_NO_CONTRACT"
#endif

// Geometry: Metal passes thread positions as attributed kernel parameters,
// which KERNEL appends; the dialect's names (LOCAL_ID_X, …) read them, so they
// exist in kernel bodies only. SIMD groups are taken to be 32 lanes wide, as
// on every Apple GPU: an engine must refuse a pipeline whose
// threadExecutionWidth is not 32. The SIMD reductions (simd_sum, simd_max)
// need an Apple7 (A14, M1) or later GPU.
//
// Types: 64-bit integers are ulong/long (Metal has them; it has no double and
// no 64-bit atomics, and no kernel file uses either). 16-bit floats travel as
// u16 bits and are converted with as_type through half.

#include <metal_stdlib>
using namespace metal;

typedef uchar u8;
typedef ushort u16;
typedef uint u32;
typedef int i32;
typedef ulong u64;
typedef long i64;

// Kernel declaration: KERNEL(name, params...) where each parameter is one of
// BUF (read-write device array), CBUF (read-only device array) or SCALAR (a
// value, bound with setBytes), the last argument the buffer index. The
// thread-position parameters follow the kernel's own.
#define KERNEL(name, ...)                                                                                          \
	kernel void name(__VA_ARGS__, uint3 dgq_lid [[thread_position_in_threadgroup]],                            \
	                 uint3 dgq_gid [[threadgroup_position_in_grid]], uint3 dgq_lsize [[threads_per_threadgroup]],  \
	                 uint3 dgq_ngroups [[threadgroups_per_grid]], uint dgq_lane [[thread_index_in_simdgroup]],     \
	                 uint dgq_simd [[simdgroup_index_in_threadgroup]])
#define BUF(T, name, idx) device T* name [[buffer(idx)]]
#define CBUF(T, name, idx) const device T* name [[buffer(idx)]]
#define SCALAR(T, name, idx) constant T& name [[buffer(idx)]]

// Qualifiers for helper functions and pointers inside them.
#define INLINE static inline
#define DEVICE_MEM device
#define THREADGROUP_MEM threadgroup
#define THREAD_MEM thread

// Thread geometry (x dimension; _Y/_Z likewise).
#define LOCAL_ID_X dgq_lid.x
#define LOCAL_ID_Y dgq_lid.y
#define LOCAL_ID_Z dgq_lid.z
#define GROUP_ID_X dgq_gid.x
#define GROUP_ID_Y dgq_gid.y
#define GROUP_ID_Z dgq_gid.z
#define LOCAL_SIZE_X dgq_lsize.x
#define LOCAL_SIZE_Y dgq_lsize.y
#define LOCAL_SIZE_Z dgq_lsize.z
#define NUM_GROUPS_X dgq_ngroups.x
#define NUM_GROUPS_Y dgq_ngroups.y
#define GLOBAL_ID_X (dgq_gid.x * dgq_lsize.x + dgq_lid.x)
#define GLOBAL_ID_Y (dgq_gid.y * dgq_lsize.y + dgq_lid.y)
#define GLOBAL_SIZE_X (dgq_ngroups.x * dgq_lsize.x)

// Group-shared memory: SHARED(T, name, n) declares T name[n] in a kernel
// body. DGQ_SHARED_STORAGE is empty for Metal; a checker or a CPU engine that
// compiles this text with clang defines it first (to static: clang accepts no
// address-space-qualified automatic variable outside OpenCL, and a CPU engine
// shares a static array among the threads of a group).
#ifndef DGQ_SHARED_STORAGE
#define DGQ_SHARED_STORAGE
#endif
#define SHARED(T, name, n) DGQ_SHARED_STORAGE threadgroup T name[n]
#define BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)

// SIMD groups of SIMD_WIDTH lanes (1-D groups: lane = thread index mod 32).
#define SIMD_WIDTH 32
#define LANE_ID dgq_lane
#define SIMD_ID dgq_simd
INLINE float dgq_simd_sum(float v) { return simd_sum(v); }
INLINE float dgq_simd_max(float v) { return simd_max(v); }
#define SIMD_SUM(v) dgq_simd_sum(v)
#define SIMD_MAX(v) dgq_simd_max(v)

// Math. MUL_RN/ADD_RN round their one operation: functions (so no expression
// around them can be contracted into a fused multiply-add) with contraction
// off inside (DGQ_NO_CONTRACT, above). The named functions are the
// precise:: ones (IEEE NaN handling for fmax/fmin; the accuracy of MSL
// Table 8.1 for the transcendentals).
INLINE float dgq_mul_rn(float a, float b) {
	DGQ_NO_CONTRACT
	return a * b;
}
INLINE float dgq_add_rn(float a, float b) {
	DGQ_NO_CONTRACT
	return a + b;
}
#define MUL_RN(a, b) dgq_mul_rn((a), (b))
#define ADD_RN(a, b) dgq_add_rn((a), (b))
#define FMA(a, b, c) fma((a), (b), (c))
#define SQRT(x) precise::sqrt(x)
#define RSQRT(x) precise::rsqrt(x)
#define EXP(x) precise::exp(x)
#define LOG(x) precise::log(x)
#define TANH(x) precise::tanh(x)
#define COS(x) precise::cos(x)
#define SIN(x) precise::sin(x)
#define FMAX(a, b) precise::fmax((a), (b))
#define FMIN(a, b) precise::fmin((a), (b))
#define FABS(x) fabs(x)

// Bit casts and half-precision conversions (values carried as u16 bits).
#define AS_FLOAT(u) as_type<float>((u32)(u))
#define AS_UINT(f) as_type<uint>((float)(f))
INLINE float dgq_f16_to_f32(u16 h) { return float(as_type<half>(h)); }
INLINE u16 dgq_f32_to_f16(float f) { return as_type<ushort>(half(f)); } // round to nearest even
INLINE float dgq_bf16_to_f32(u16 b) { return as_type<float>(((u32)b) << 16); }
INLINE u16 dgq_f32_to_bf16(float f) {
	u32 u = as_type<uint>(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u); // quiet NaN
	return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 // round to nearest even
}
#define F16_TO_F32(h) dgq_f16_to_f32(h)
#define F32_TO_F16(f) dgq_f32_to_f16(f)
#define BF16_TO_F32(b) dgq_bf16_to_f32(b)
#define F32_TO_BF16(f) dgq_f32_to_bf16(f)
