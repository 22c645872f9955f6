package cpu

// The sampler's per-row arithmetic (MODEL_SPEC §4.3) on host slices: what
// the CPU backend's Temper, RowStats, RoundBF16 and Categorical compute, and
// the reference the generation loop and the checks compare with.

import "math"

// Entropy is the entropy in nats of softmax(logits), computed as
// torch.distributions.Categorical(logits=…).entropy() does in float32
// (MODEL_SPEC §4.3 step 5): normalized logits ℓ = z − logsumexp(z),
// p = softmax(ℓ), H = −Σ ℓ·p (ℓ clamped at the float32 minimum, which only
// matters for −∞ entries).
func Entropy(logits []float32) float32 {
	if len(logits) == 0 {
		return 0
	}
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range logits {
		sum += float64(float32(math.Exp(float64(v - mx))))
	}
	lse := mx + float32(math.Log(float64(float32(sum))))
	nl := make([]float32, len(logits))
	for i, v := range logits {
		nl[i] = max(v-lse, -math.MaxFloat32)
	}
	p := make([]float32, len(logits))
	softmax(nl, p)
	var h float64
	for i, l := range nl {
		h += float64(l * p[i])
	}
	return -float32(h)
}

// Argmax is the index of the first maximal element (torch.argmax's choice).
func Argmax[T float32 | float64](row []T) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}

// TemperRow writes logits/T to out (Z′ = Z / T, one float32 division per
// element, not a multiplication by 1/T). out may alias logits.
func TemperRow(logits []float32, T float32, out []float32) {
	out = out[:len(logits)]
	for i, z := range logits {
		out[i] = z / T
	}
}

// RoundBF16 rounds x to the nearest bfloat16 (ties to even), returned as
// float32; NaN stays NaN.
func RoundBF16(x float32) float32 {
	b := math.Float32bits(x)
	if x != x {
		return x
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// Categorical draws from softmax(row) by inverse CDF in float64, given
// one uniform u in [0, 1): with m = max(row), wᵥ = exp(float64(rowᵥ) − m)
// and S = Σ wᵥ (in index order), it returns the first v whose running sum
// w₀+…+wᵥ exceeds u·S. If rounding leaves no such v, it returns the last v
// with wᵥ > 0. Ids of probability zero (−∞ logits, or wᵥ underflowing to 0)
// are never returned.
func Categorical(row []float32, u float64) int {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	target := u * sum
	var cum float64
	last := 0
	for i, v := range row {
		w := math.Exp(float64(v) - m)
		if w == 0 {
			continue
		}
		cum += w
		last = i
		if cum > target {
			return i
		}
	}
	return last
}
