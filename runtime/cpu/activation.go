package cpu

import "math"

// geluTanhCoef is √(2/π).
const geluTanhCoef = 0.7978845608028654

// gelu is PyTorch's GELU with approximate="tanh" (gelu_pytorch_tanh,
// MODEL_SPEC §3.1.2), evaluated in float64 and rounded once.
func gelu(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(geluTanhCoef*(v+0.044715*v*v*v))))
}

// geluMul writes gelu(g[i])·u[i] to out, rounding like PyTorch (the GELU,
// then the product, each to float32).
func geluMul(g, u, out []float32) {
	u, out = u[:len(g)], out[:len(g)]
	for i, v := range g {
		out[i] = gelu(v) * u[i]
	}
}

// softmax writes softmax(x) to out in float32: exp(x − max) per element,
// the sum in float64 rounded to float32, then a multiply by its reciprocal
// (PyTorch's vectorized last-dimension softmax). out may alias x.
func softmax(x, out []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	out = out[:len(x)]
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		out[i] = e
		sum += float64(e)
	}
	inv := 1 / float32(sum)
	for i := range out {
		out[i] *= inv
	}
}

// softcap is c·tanh(z/c) in float32: a division, tanh, a multiply
// (MODEL_SPEC §3.7).
func softcap(z, c float32) float32 {
	return float32(math.Tanh(float64(z/c))) * c
}
