package metal

import "github.com/dgq-dev/dgq/runtime/backend"

// AppleGPU is what the Metal Shading Language specification allows the
// f32 arithmetic of an Apple GPU running dgq's kernels (compiled in Safe
// math mode with the precise functions, CompilePlan): subnormals may be
// flushed to zero (§8.1), and the math functions are within Table 8.1's
// bounds — exp, log, sin, cos ≤ 4 ulp, tanh ≤ 5 ulp, sqrt, rsqrt and
// division correctly rounded — against the infinitely precise result
// (§8.4). The device engine reports it, and the conformance suite holds the
// backend to it (conformance.OptionsFor). The specification also allows
// round toward zero for f32 arithmetic (§8.2); dgq's bit-exact ops need
// round to nearest even, which the exactness test and dgq selftest check
// on the device.
var AppleGPU = backend.Numerics{
	FlushSubnormals: true,
	ULP: backend.MathULP{Exp: 4, Log: 4, Tanh: 5, Sin: 4, Cos: 4, Sqrt: backend.CorrectlyRounded,
		Rsqrt: backend.CorrectlyRounded, Div: backend.CorrectlyRounded},
	Source: "Metal Shading Language Specification 4.1 (2026-06-04) §8.1, §8.4 Table 8.1",
}

// glibcNumerics is the host engine's arithmetic in its default mode: IEEE
// f32 with gradual underflow, and libm's single-precision functions within
// the GNU C Library manual's bounds for x86-64 ("Errors in Math Functions":
// expf, logf, sinf, cosf 1 ulp, tanhf 2 ulp), each plus half an ulp (the
// manual counts from the correctly rounded result); rsqrt is 1/sqrtf, two
// roundings (≤ 2 ulp).
var glibcNumerics = backend.Numerics{
	ULP: backend.MathULP{Exp: 1.5, Log: 1.5, Tanh: 2.5, Sin: 1.5, Cos: 1.5, Sqrt: backend.CorrectlyRounded,
		Rsqrt: 2, Div: backend.CorrectlyRounded},
	Source: "GNU C Library manual, Errors in Math Functions (x86-64, float)",
}
