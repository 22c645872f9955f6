package model

import (
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/layout"
)

// RoPEInvFreq returns the headDim/2 inverse frequencies of a rope type for
// backend.Backend.RoPE (MODEL_SPEC §3.1.3), zero for the pairs a
// proportional rope leaves unrotated.
func RoPEInvFreq(p layout.RopeParams, headDim int) ([]float32, error) {
	f, err := invFreq(p, headDim)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return f, nil
}

// invFreq computes inverse frequencies in float32 as transformers does:
// inv_freq[i] = 1 / θ^(2i/hd), with the exponent a float32 division, the
// power and the reciprocal in float32. "default" rotates all hd/2 pairs;
// "proportional" rotates the first int(p·hd // 2) pairs, still with the full
// head dim as denominator, and leaves the rest at frequency 0.
func invFreq(p layout.RopeParams, hd int) ([]float32, error) {
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
	inv := make([]float32, half)
	theta := float64(float32(p.Theta))
	for i := range rotated {
		e := float32(2*i) / float32(hd)
		inv[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	return inv, nil
}
