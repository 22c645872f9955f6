// metal_stdlib for clang on a CPU: the part of the Metal standard library
// that dgq's kernels use, so that the Metal text of a translation unit
// compiles with clang's C++14 front end. `#include <metal_stdlib>` resolves
// here (the package writes this file as metal_stdlib into a directory on
// the include path, with no system include path).
//
// Two modes:
//
//   - check (default): Metal's address spaces are clang address spaces
//     (device 1, constant 2 and read-only, threadgroup 3, thread the default
//     one), so passing a pointer of one space where another is declared is an
//     error; functions are declared only. The allowed Metal attributes are
//     empty macros, so [[buffer(3)]] becomes an empty attribute list and any
//     other attribute stays unknown (an error under -Werror). double is a
//     name that cannot be a type.
//   - host (DGQ_MSL_HOST defined): the address spaces are empty (constant is
//     const), kernels are static functions the generated launchers call,
//     threadgroup arrays are static (shared by a group's threads, whose
//     groups run one after another), math is libm's and the SIMD and barrier
//     functions call the host runtime (metal/hostrt). With
//     DGQ_MSL_SIMD_REVERSED defined too, SIMD reductions fold the lanes from
//     the last down to lane 0 instead of in butterfly order; with
//     DGQ_MSL_SPEC_MATH, the math functions are the runtime's dgq_spec_*
//     (hostrt/specmath.c): results at the bounds of MSL Table 8.1.
//
// __METAL_VERSION__ is the compiler's: the check and the host engine
// define it on the command line, as the language version of the compile
// plan they build (metal.CompilePlan.MetalVersion).
//
// Nothing here is Apple's code; it declares what the Metal Shading Language
// specification names.

#ifndef DGQ_METAL_STDLIB
#define DGQ_METAL_STDLIB

#ifndef __METAL_VERSION__
#error "define __METAL_VERSION__ as the compile plan's language version (300, 320)"
#endif

// ---------------------------------------------------------------------------
// Address spaces, kernels, threadgroup storage.

#ifdef DGQ_MSL_HOST
#define device
#define constant const
#define threadgroup
#define thread
#define kernel static
#define DGQ_SHARED_STORAGE static
#else
#define device __attribute__((address_space(1)))
#define constant const __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#define thread
#define kernel extern "C"
// A SHARED array names the kernel's first thread-position parameter, so it
// compiles only in a kernel body (Metal allows threadgroup variables nowhere
// else); static because clang rejects address-space-qualified automatic
// variables outside OpenCL.
#define DGQ_SHARED_STORAGE                                                                                         \
	(void)dgq_lid;                                                                                             \
	static
#endif

// ---------------------------------------------------------------------------
// The allowed attributes of kernel parameters: each an empty macro.

#define buffer(index)
#define thread_position_in_grid
#define thread_position_in_threadgroup
#define threadgroup_position_in_grid
#define threads_per_grid
#define threads_per_threadgroup
#define threadgroups_per_grid
#define thread_index_in_threadgroup
#define thread_index_in_simdgroup
#define simdgroup_index_in_threadgroup
#define threads_per_simdgroup
#define simdgroups_per_threadgroup
#define thread_execution_width

// ---------------------------------------------------------------------------
// Scalar and vector types.

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
#define half _Float16 // a keyword in Metal: a macro, so that it cannot name a variable here either

#define DGQ_VECTORS(T, name)                                                                                       \
	typedef T name##2 __attribute__((ext_vector_type(2)));                                                   \
	typedef T name##3 __attribute__((ext_vector_type(3)));                                                   \
	typedef T name##4 __attribute__((ext_vector_type(4)))
DGQ_VECTORS(float, float);
DGQ_VECTORS(_Float16, half);
DGQ_VECTORS(int, int);
DGQ_VECTORS(uint, uint);
DGQ_VECTORS(ulong, ulong);
DGQ_VECTORS(short, short);
DGQ_VECTORS(ushort, ushort);
DGQ_VECTORS(char, char);
DGQ_VECTORS(uchar, uchar);
DGQ_VECTORS(bool, bool);
#undef DGQ_VECTORS

#ifdef DGQ_MSL_HOST
// The host runtime (metal/hostrt: fibers.c or threads.c) and libm.
extern "C" {
void dgq_rt_barrier(void);
void dgq_rt_simd_barrier(void);
void dgq_rt_simd_exchange(const void* mine, void* all, unsigned size);
unsigned dgq_rt_simd_lanes(void);
unsigned dgq_rt_lane(void);
float expf(float);
float exp2f(float);
float logf(float);
float log2f(float);
float tanhf(float);
float cosf(float);
float sinf(float);
float tanf(float);
float powf(float, float);
float dgq_spec_exp(float);
float dgq_spec_exp2(float);
float dgq_spec_log(float);
float dgq_spec_log2(float);
float dgq_spec_tanh(float);
float dgq_spec_cos(float);
float dgq_spec_sin(float);
float dgq_spec_rsqrt(float);
}
#ifdef DGQ_MSL_SPEC_MATH
#define DGQ_LIBM(name) dgq_spec_##name
#define DGQ_RSQRT(x) dgq_spec_rsqrt(x)
#else
#define DGQ_LIBM(name) name##f
#define DGQ_RSQRT(x) 1.0f / __builtin_sqrtf(x)
#endif
#define DGQ_FN(decl, body)                                                                                         \
	static inline decl { return body; }
#else
#define DGQ_FN(decl, body) decl;
#endif

namespace metal {

// ---------------------------------------------------------------------------
// Bit casts.

template <typename T, typename U> inline T as_type(U u) {
	static_assert(sizeof(T) == sizeof(U), "as_type: the types differ in size");
	return __builtin_bit_cast(T, u);
}

// ---------------------------------------------------------------------------
// Math: the plain, precise:: and fast:: forms (one implementation on the
// host: libm's, correctly rounded where IEEE asks; with DGQ_MSL_SPEC_MATH
// the runtime's, at the bounds of MSL Table 8.1).

#define DGQ_MATH                                                                                                   \
	DGQ_FN(float fma(float a, float b, float c), __builtin_fmaf(a, b, c))                                      \
	DGQ_FN(float sqrt(float x), __builtin_sqrtf(x))                                                            \
	DGQ_FN(float rsqrt(float x), DGQ_RSQRT(x))                                                                 \
	DGQ_FN(float exp(float x), DGQ_LIBM(exp)(x))                                                               \
	DGQ_FN(float exp2(float x), DGQ_LIBM(exp2)(x))                                                             \
	DGQ_FN(float log(float x), DGQ_LIBM(log)(x))                                                               \
	DGQ_FN(float log2(float x), DGQ_LIBM(log2)(x))                                                             \
	DGQ_FN(float tanh(float x), DGQ_LIBM(tanh)(x))                                                             \
	DGQ_FN(float cos(float x), DGQ_LIBM(cos)(x))                                                               \
	DGQ_FN(float sin(float x), DGQ_LIBM(sin)(x))                                                               \
	DGQ_FN(float tan(float x), tanf(x))                                                                        \
	DGQ_FN(float pow(float x, float y), powf(x, y))                                                            \
	DGQ_FN(float fmax(float a, float b), __builtin_fmaxf(a, b))                                                \
	DGQ_FN(float fmin(float a, float b), __builtin_fminf(a, b))                                                \
	DGQ_FN(float fabs(float x), __builtin_fabsf(x))                                                            \
	DGQ_FN(float floor(float x), __builtin_floorf(x))                                                          \
	DGQ_FN(float ceil(float x), __builtin_ceilf(x))                                                            \
	DGQ_FN(float trunc(float x), __builtin_truncf(x))                                                          \
	DGQ_FN(float rint(float x), __builtin_rintf(x))                                                            \
	DGQ_FN(float divide(float x, float y), x / y)

DGQ_MATH
namespace precise {
DGQ_MATH
}
namespace fast {
DGQ_MATH
}
#undef DGQ_MATH

DGQ_FN(float abs(float x), __builtin_fabsf(x))
DGQ_FN(int abs(int x), x < 0 ? -x : x)
DGQ_FN(bool isnan(float x), x != x)
DGQ_FN(bool isinf(float x), __builtin_fabsf(x) == __builtin_inff())
DGQ_FN(bool isfinite(float x), __builtin_fabsf(x) < __builtin_inff())
DGQ_FN(float min(float a, float b), __builtin_fminf(a, b))
DGQ_FN(float max(float a, float b), __builtin_fmaxf(a, b))
DGQ_FN(int min(int a, int b), a < b ? a : b)
DGQ_FN(int max(int a, int b), a > b ? a : b)
DGQ_FN(uint min(uint a, uint b), a < b ? a : b)
DGQ_FN(uint max(uint a, uint b), a > b ? a : b)
DGQ_FN(ulong min(ulong a, ulong b), a < b ? a : b)
DGQ_FN(ulong max(ulong a, ulong b), a > b ? a : b)
DGQ_FN(float clamp(float x, float lo, float hi), __builtin_fminf(__builtin_fmaxf(x, lo), hi))
DGQ_FN(uint clamp(uint x, uint lo, uint hi), x < lo ? lo : (x > hi ? hi : x))
DGQ_FN(int clamp(int x, int lo, int hi), x < lo ? lo : (x > hi ? hi : x))
DGQ_FN(uint popcount(uint x), (uint)__builtin_popcount(x))
DGQ_FN(uint clz(uint x), x == 0u ? 32u : (uint)__builtin_clz(x))
DGQ_FN(uint ctz(uint x), x == 0u ? 32u : (uint)__builtin_ctz(x))

// ---------------------------------------------------------------------------
// Synchronization.

enum class mem_flags : uint {
	mem_none = 0,
	mem_device = 1,
	mem_threadgroup = 2,
	mem_texture = 4,
	mem_threadgroup_imageblock = 8,
};
DGQ_FN(mem_flags operator|(mem_flags a, mem_flags b), (mem_flags)((uint)a | (uint)b))
DGQ_FN(void threadgroup_barrier(mem_flags flags), ((void)flags, dgq_rt_barrier()))
DGQ_FN(void simdgroup_barrier(mem_flags flags), ((void)flags, dgq_rt_simd_barrier()))

// ---------------------------------------------------------------------------
// SIMD-group functions over the 32 lanes of a SIMD group. On the host every
// lane publishes its value (dgq_rt_simd_exchange) and computes the result
// from all of them; reductions combine in the order of a butterfly (lane i
// with lane i xor 16, then 8, 4, 2, 1), or with DGQ_MSL_SIMD_REVERSED from
// the last lane down to the first, so every lane gets the same value.

#ifdef DGQ_MSL_HOST
inline float dgq_max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float dgq_min(float a, float b) { return __builtin_fminf(a, b); }
template <typename T> inline T dgq_max(T a, T b) { return a > b ? a : b; }
template <typename T> inline T dgq_min(T a, T b) { return a < b ? a : b; }
template <typename T> struct dgq_sum_op {
	static T apply(T a, T b) { return a + b; }
};
template <typename T> struct dgq_max_op {
	static T apply(T a, T b) { return dgq_max(a, b); }
};
template <typename T> struct dgq_min_op {
	static T apply(T a, T b) { return dgq_min(a, b); }
};
template <typename Op, typename T> inline T dgq_simd_reduce(T v) {
	T w[32];
	dgq_rt_simd_exchange(&v, w, sizeof(T));
	uint n = dgq_rt_simd_lanes();
#ifdef DGQ_MSL_SIMD_REVERSED
	T r = w[n - 1];
	for (uint i = n - 1; i-- > 0;) r = Op::apply(r, w[i]);
	return r;
#endif
	for (uint o = 16; o > 0; o >>= 1) {
		T t[32];
		for (uint i = 0; i < 32; i++) t[i] = (i < n && (i ^ o) < n) ? Op::apply(w[i], w[i ^ o]) : w[i];
		for (uint i = 0; i < 32; i++) w[i] = t[i];
	}
	return w[dgq_rt_lane()];
}
template <typename T> inline T dgq_simd_lane_of(T v, uint lane) {
	T w[32];
	dgq_rt_simd_exchange(&v, w, sizeof(T));
	return lane < dgq_rt_simd_lanes() ? w[lane] : v;
}
template <typename T> inline T simd_sum(T v) { return dgq_simd_reduce<dgq_sum_op<T>>(v); }
template <typename T> inline T simd_max(T v) { return dgq_simd_reduce<dgq_max_op<T>>(v); }
template <typename T> inline T simd_min(T v) { return dgq_simd_reduce<dgq_min_op<T>>(v); }
template <typename T> inline T simd_shuffle(T v, ushort lane) { return dgq_simd_lane_of(v, lane); }
template <typename T> inline T simd_broadcast(T v, ushort lane) { return dgq_simd_lane_of(v, lane); }
template <typename T> inline T simd_shuffle_xor(T v, ushort mask) { return dgq_simd_lane_of(v, dgq_rt_lane() ^ mask); }
template <typename T> inline T simd_shuffle_down(T v, ushort delta) { return dgq_simd_lane_of(v, dgq_rt_lane() + delta); }
template <typename T> inline T simd_shuffle_up(T v, ushort delta) {
	uint l = dgq_rt_lane();
	return dgq_simd_lane_of(v, l >= delta ? l - delta : 32u);
}
#else
template <typename T> T simd_sum(T v);
template <typename T> T simd_max(T v);
template <typename T> T simd_min(T v);
template <typename T> T simd_shuffle(T v, ushort lane);
template <typename T> T simd_broadcast(T v, ushort lane);
template <typename T> T simd_shuffle_xor(T v, ushort mask);
template <typename T> T simd_shuffle_down(T v, ushort delta);
template <typename T> T simd_shuffle_up(T v, ushort delta);
#endif

// ---------------------------------------------------------------------------
// SIMD-group matrices (the MSL specification's SIMD-group matrix functions):
// small matrices that the lanes of a SIMD group hold together. dgq's kernels
// use them in one form, which is all the check accepts and the host models:
// make_filled_simdgroup_matrix, simdgroup_load and simdgroup_store with a
// pointer at the matrix's first element and a row stride (elements_per_row;
// neither matrix_origin nor transpose_matrix), simdgroup_multiply_accumulate
// (d = a·b + c) and simdgroup_multiply (d = a·b). Every lane of the SIMD
// group makes each call, with the same arguments. Which lane holds which
// elements is Apple's, and nothing here depends on it.
//
// Host: lane 0 of the SIMD group holds the whole matrix (row-major: element
// (r, c) at r·Cols + c) and does all of its arithmetic; the other lanes keep
// a copy they never compute, since only lane 0's is ever stored.
// simdgroup_load and simdgroup_store begin with a SIMD meeting of the
// group's lanes (they arrive together, as a GPU's lanes do, and a lane that
// skips one is a divergence the runtime reports), and only lane 0 loads and
// stores, so that no two threads write the same memory. Each element of a
// product is c + Σ_k a·b, fused multiply-adds in k order from c, in f32.

#ifdef DGQ_MSL_HOST
template <typename T, int Cols, int Rows> struct simdgroup_matrix {
	T dgq_e[Rows * Cols];
};
inline float dgq_mat_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline _Float16 dgq_mat_fma(_Float16 a, _Float16 b, _Float16 c) {
	return (_Float16)__builtin_fmaf((float)a, (float)b, (float)c);
}
template <typename T, int Cols, int Rows>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value) {
	simdgroup_matrix<T, Cols, Rows> m;
	for (int i = 0; i < Rows * Cols; i++) m.dgq_e[i] = value; // every lane: cheap, and no lane's copy is undefined
	return m;
}
template <typename T, int Cols, int Rows>
inline void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, const T* src, ulong elements_per_row = Cols) {
	dgq_rt_simd_barrier();
	if (dgq_rt_lane() != 0) return;
	for (int r = 0; r < Rows; r++) {
		for (int c = 0; c < Cols; c++) d.dgq_e[r * Cols + c] = src[(ulong)r * elements_per_row + (ulong)c];
	}
}
template <typename T, int Cols, int Rows>
inline void simdgroup_store(simdgroup_matrix<T, Cols, Rows> a, T* dst, ulong elements_per_row = Cols) {
	dgq_rt_simd_barrier();
	if (dgq_rt_lane() != 0) return;
	for (int r = 0; r < Rows; r++) {
		for (int c = 0; c < Cols; c++) dst[(ulong)r * elements_per_row + (ulong)c] = a.dgq_e[r * Cols + c];
	}
}
template <typename T, int Cols, int Rows, int K>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, Cols, Rows>& d, simdgroup_matrix<T, K, Rows>& a,
                                          simdgroup_matrix<T, Cols, K>& b, simdgroup_matrix<T, Cols, Rows>& c) {
	if (dgq_rt_lane() != 0) return;
	simdgroup_matrix<T, Cols, Rows> t;
	for (int r = 0; r < Rows; r++) {
		for (int j = 0; j < Cols; j++) {
			T s = c.dgq_e[r * Cols + j];
			for (int k = 0; k < K; k++) s = dgq_mat_fma(a.dgq_e[r * K + k], b.dgq_e[k * Cols + j], s);
			t.dgq_e[r * Cols + j] = s;
		}
	}
	d = t;
}
template <typename T, int Cols, int Rows, int K>
inline void simdgroup_multiply(simdgroup_matrix<T, Cols, Rows>& d, simdgroup_matrix<T, K, Rows>& a,
                               simdgroup_matrix<T, Cols, K>& b) {
	simdgroup_matrix<T, Cols, Rows> z = make_filled_simdgroup_matrix<T, Cols, Rows>((T)0);
	simdgroup_multiply_accumulate(d, a, b, z);
}
#else
// Opaque: a kernel reaches the elements only through the functions.
template <typename T, int Cols, int Rows> class simdgroup_matrix {
	T dgq_opaque[Rows * Cols];

public:
	simdgroup_matrix() = default;
};
template <typename T, int Cols, int Rows> simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T value);
template <typename T, int Cols, int Rows>
void simdgroup_load(thread simdgroup_matrix<T, Cols, Rows>& d, const device T* src, ulong elements_per_row = Cols);
template <typename T, int Cols, int Rows>
void simdgroup_load(thread simdgroup_matrix<T, Cols, Rows>& d, const threadgroup T* src, ulong elements_per_row = Cols);
template <typename T, int Cols, int Rows>
void simdgroup_store(thread simdgroup_matrix<T, Cols, Rows> a, device T* dst, ulong elements_per_row = Cols);
template <typename T, int Cols, int Rows>
void simdgroup_store(thread simdgroup_matrix<T, Cols, Rows> a, threadgroup T* dst, ulong elements_per_row = Cols);
template <typename T, int Cols, int Rows, int K>
void simdgroup_multiply_accumulate(thread simdgroup_matrix<T, Cols, Rows>& d, thread simdgroup_matrix<T, K, Rows>& a,
                                   thread simdgroup_matrix<T, Cols, K>& b, thread simdgroup_matrix<T, Cols, Rows>& c);
template <typename T, int Cols, int Rows, int K>
void simdgroup_multiply(thread simdgroup_matrix<T, Cols, Rows>& d, thread simdgroup_matrix<T, K, Rows>& a,
                        thread simdgroup_matrix<T, Cols, K>& b);
#endif
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

} // namespace metal

#undef DGQ_FN

#ifndef DGQ_MSL_HOST
// Metal has no double: the name is taken so that any use is an error.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wkeyword-macro"
#define double dgq_metal_has_no_double
#pragma clang diagnostic pop
#endif

#endif // DGQ_METAL_STDLIB
