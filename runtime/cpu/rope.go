package cpu

import "math"

// ropeTable returns cos and sin for positions pos0…pos0+n−1: [n][hd/2] each,
// hd/2 = len(invFreq) (the second half of transformers' cat(a, a) repeats
// the first). The angle is the
// float32 product f32(p)·inv_freq[i]; cos and sin are rounded to float32.
func ropeTable(invFreq []float32, pos0, n int) (cos, sin []float32) {
	half := len(invFreq)
	cos = make([]float32, n*half)
	sin = make([]float32, n*half)
	for t := range n {
		p := float32(pos0 + t)
		for i, f := range invFreq {
			a := float64(p * f)
			cos[t*half+i] = float32(math.Cos(a))
			sin[t*half+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}

// applyRope rotates one head vector x (hd values) in place with the split-half
// pairing (j, j+hd/2): x·cos + rotate_half(x)·sin, every product rounded to
// float32 before the sum as PyTorch's separate kernels do.
func applyRope(x, cos, sin []float32) {
	half := len(x) / 2
	lo, hi := x[:half], x[half:2*half]
	cos, sin = cos[:half], sin[:half]
	for j := range half {
		a, b := lo[j], hi[j]
		lo[j] = float32(a*cos[j]) - float32(b*sin[j])
		hi[j] = float32(b*cos[j]) + float32(a*sin[j])
	}
}
