package cpu

import "math"

// rmsNorm writes RMSNorm(x) to out (MODEL_SPEC §3.1.1), as transformers
// computes it in float32: m = mean(x²) + ε, n = x·m^(−1/2) (PyTorch
// evaluates the power −0.5 as 1/√m), then n·w when w is not nil (the
// scale is w, not 1 + w). Squares are rounded to float32 as x.pow(2) does
// and summed in float64. out may alias x.
func rmsNorm(x, w, out []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v * v)
	}
	ms := float32(ss)/float32(len(x)) + eps
	inv := 1 / float32(math.Sqrt(float64(ms)))
	out = out[:len(x)]
	if w == nil {
		for i, v := range x {
			out[i] = v * inv
		}
		return
	}
	w = w[:len(x)]
	for i, v := range x {
		out[i] = float32(v*inv) * w[i]
	}
}

// rmsNormRows applies rmsNorm to each d-wide row of x.
func rmsNormRows(x, w, out []float32, d int, eps float32) {
	for r := 0; r+d <= len(x); r += d {
		rmsNorm(x[r:r+d], w, out[r:r+d], eps)
	}
}
