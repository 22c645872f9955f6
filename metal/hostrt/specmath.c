// The math functions of the host engine's spec mode
// (metal.HostOptions.SpecMath): each returns the f32 value farthest from the
// exact result that the Metal Shading Language still allows, so the kernels
// run as if on a GPU at the bounds of MSL Table 8.1 — exp, log, sin, cos
// within 4 ulp, tanh within 5, sqrt, rsqrt and division correctly rounded —
// not better. metal_stdlib.h's precise:: (and plain and fast::) functions
// call them in that mode. The bounds come from the Go side, metal.AppleGPU
// (the host build defines DGQ_SPEC_ULP_*), so what the engine reports and
// what it computes cannot part; Table 8.1's exp2 and log2 bounds are exp's
// and log's. tan and pow, which no kernel calls, stay libm's in every mode.
//
// The exact result is libm's double-precision value of the f32 argument
// (its error, under one double ulp, is 2⁻²⁹ of an f32 ulp). An ulp of a real
// x is the spacing of the f32 values of x's binade, 2^(e−24) for
// 2^(e−1) ≤ |x| < 2^e (at least 2⁻¹⁴⁹), as the specification defines it
// (§8.4). Whether the error goes up or down is a hash of the argument's bits
// and the function: errors of one sign across a row would cancel in a
// softmax, mixed signs do not. Zeros, infinities and NaNs of the exact
// result are returned as they are. In a thread that flushes subnormals
// (DGQ_RT_FLUSH) the conversions flush too, as the GPU's would.

#include <math.h>
#include <stdint.h>
#include <string.h>

#if !defined(DGQ_SPEC_ULP_EXP) || !defined(DGQ_SPEC_ULP_LOG) || !defined(DGQ_SPEC_ULP_TANH) || \
    !defined(DGQ_SPEC_ULP_SIN) || !defined(DGQ_SPEC_ULP_COS)
#error "the host build defines DGQ_SPEC_ULP_* from metal.AppleGPU"
#endif

// dgq_spec_side is the sign of the error for argument bits b of function f:
// +1 or −1.
static int dgq_spec_side(float x, uint32_t f) {
	uint32_t h;
	memcpy(&h, &x, sizeof h);
	h ^= f * 0x9e3779b9u;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return (h & 1u) ? 1 : -1;
}

// dgq_spec_at returns the f32 value nearest to exact + side·n·ulp(exact)
// that is within n ulp of exact.
static float dgq_spec_at(double exact, double n, int side) {
	if (exact != exact || exact == 0 || isinf(exact)) return (float)exact;
	int e;
	frexp(exact, &e); // |exact| in [2^(e−1), 2^e)
	double ulp = ldexp(1.0, e - 24);
	if (ulp < 0x1p-149) ulp = 0x1p-149;
	double lim = n * ulp;
	float f = (float)(exact + side * lim);
	if (fabs((double)f - exact) > lim) f = nextafterf(f, side > 0 ? -INFINITY : INFINITY);
	return f;
}

// The functions, each at its bound.
float dgq_spec_exp(float x) { return dgq_spec_at(exp((double)x), DGQ_SPEC_ULP_EXP, dgq_spec_side(x, 1)); }
float dgq_spec_exp2(float x) { return dgq_spec_at(exp2((double)x), DGQ_SPEC_ULP_EXP, dgq_spec_side(x, 2)); }
float dgq_spec_log(float x) { return dgq_spec_at(log((double)x), DGQ_SPEC_ULP_LOG, dgq_spec_side(x, 3)); }
float dgq_spec_log2(float x) { return dgq_spec_at(log2((double)x), DGQ_SPEC_ULP_LOG, dgq_spec_side(x, 4)); }
float dgq_spec_tanh(float x) { return dgq_spec_at(tanh((double)x), DGQ_SPEC_ULP_TANH, dgq_spec_side(x, 5)); }
float dgq_spec_cos(float x) { return dgq_spec_at(cos((double)x), DGQ_SPEC_ULP_COS, dgq_spec_side(x, 6)); }
float dgq_spec_sin(float x) { return dgq_spec_at(sin((double)x), DGQ_SPEC_ULP_SIN, dgq_spec_side(x, 7)); }

// rsqrt is correctly rounded in Table 8.1: the double value rounded once to
// f32 (correctly rounded unless 1/√x lies within a double ulp of a midpoint
// between two f32 values, where the two roundings may differ by one ulp).
float dgq_spec_rsqrt(float x) { return (float)(1.0 / sqrt((double)x)); }
