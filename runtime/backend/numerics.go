package backend

// Numerics is what a backend's float32 arithmetic may do, as its vendor
// documents it: whether subnormals may be flushed to zero and how far each
// math function the kernels call may be from the exact result. The
// conformance suite derives its options and its bounds from it
// (runtime/conformance: OptionsFor, TolerancesFor), so a backend is held to
// what its hardware and compiler promise, no tighter and no looser.
//
// Sums, products and conversions are IEEE single precision with round to
// nearest even on every backend (the bit-exact ops of Backend rely on it);
// a device that rounds otherwise fails the suite's exact cases.
type Numerics struct {
	// FlushSubnormals: f32 subnormal inputs and results of arithmetic may
	// be flushed to zero (MSL §8.1 allows it on Apple GPUs).
	FlushSubnormals bool `json:"flush_subnormals"`
	// ULP bounds each math function's result, in units in the last place
	// of the exact result (0.5: correctly rounded).
	ULP MathULP `json:"ulp"`
	// Source names the document the numbers come from.
	Source string `json:"source"`
}

// MathULP are the bounds, in ulps of the exact result, of the math
// functions the kernels call (the dialect's EXP, LOG, TANH, COS, SIN, SQRT,
// RSQRT and f32 division). An ulp of a real number x is the spacing of the
// f32 values of x's binade (2^(e−23) for 2^e ≤ |x| < 2^(e+1)).
type MathULP struct {
	Exp   float64 `json:"exp"`
	Log   float64 `json:"log"`
	Tanh  float64 `json:"tanh"`
	Sin   float64 `json:"sin"`
	Cos   float64 `json:"cos"`
	Sqrt  float64 `json:"sqrt"`
	Rsqrt float64 `json:"rsqrt"`
	Div   float64 `json:"div"`
}

// CorrectlyRounded is the bound of a correctly rounded function: half an
// ulp.
const CorrectlyRounded = 0.5
