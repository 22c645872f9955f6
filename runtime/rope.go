package runtime

import (
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/layout"
)

// rope holds the inverse frequencies of one layer type (MODEL_SPEC §3.1.3):
// hd/2 values, zero for the pairs a proportional rope leaves unrotated.
type rope struct {
	hd      int
	invFreq []float32
}

// newRope computes inverse frequencies in float32 as transformers does:
// inv_freq[i] = 1 / θ^(2i/hd), with the exponent a float32 division, the
// power and the reciprocal in float32. "default" rotates all hd/2 pairs;
// "proportional" rotates the first int(p·hd // 2) pairs, still with the full
// head dim as denominator, and leaves the rest at frequency 0.
func newRope(p layout.RopeParams, hd int) (*rope, error) {
	if hd <= 0 || hd%2 != 0 {
		return nil, fmt.Errorf("head dim %d is not a positive even number", hd)
	}
	half := hd / 2
	var rotated int
	switch p.Type {
	case "default":
		if p.PartialRotaryFactor != 1 {
			return nil, fmt.Errorf("rope_type default with partial_rotary_factor %g is not supported", p.PartialRotaryFactor)
		}
		rotated = half
	case "proportional":
		rotated = int(math.Floor(p.PartialRotaryFactor * float64(hd) / 2))
		rotated = min(max(rotated, 0), half)
	default:
		return nil, fmt.Errorf("rope_type %q is not supported (want default or proportional)", p.Type)
	}
	r := &rope{hd: hd, invFreq: make([]float32, half)}
	theta := float64(float32(p.Theta))
	for i := range rotated {
		e := float32(2*i) / float32(hd)
		r.invFreq[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	return r, nil
}

// table returns cos and sin for positions pos0…pos0+n−1: [n][hd/2] each (the
// second half of transformers' cat(a, a) repeats the first). The angle is the
// float32 product f32(p)·inv_freq[i]; cos and sin are rounded to float32.
func (r *rope) table(pos0, n int) (cos, sin []float32) {
	half := r.hd / 2
	cos = make([]float32, n*half)
	sin = make([]float32, n*half)
	for t := range n {
		p := float32(pos0 + t)
		for i, f := range r.invFreq {
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
