package runtime

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// genPCGIncrement is the second PCG seed word (the stream selector) of the
// generation RNG: the ASCII bytes "dgq-gen1".
const genPCGIncrement = 0x6467712d67656e31

// genRNG is the generation random number generator (docs/sampler.md): one
// math/rand/v2 PCG (PCG-DXSM, 128-bit state) seeded with
// rand.NewPCG(seed, genPCGIncrement) serves the whole Generate call. Only
// its Uint64 output is used; uniforms and integers are derived from it by
// the two documented rules below, so another backend can reproduce every
// draw bit for bit from the PCG stream alone.
type genRNG struct{ src *rand.PCG }

func newGenRNG(seed uint64) *genRNG { return &genRNG{src: rand.NewPCG(seed, genPCGIncrement)} }

// uniform is a float64 in [0, 1): the top 53 bits of one Uint64 times 2⁻⁵³.
func (r *genRNG) uniform() float64 {
	return float64(r.src.Uint64()>>11) * 0x1p-53
}

// intN is an integer in [0, n), n ≥ 1, by Lemire's multiply-shift with
// rejection: x = Uint64(); (hi, lo) = x·n as a 128-bit product; while
// lo < (2⁶⁴ − n) mod n, draw x again; the result is hi. It is exactly
// uniform and uses one Uint64 except on the (rare) rejections.
func (r *genRNG) intN(n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(r.src.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.src.Uint64(), un)
		}
	}
	return int(hi)
}

// ids fills dst with uniform ids in [0, V), in index order.
func (r *genRNG) ids(dst []int, V int) {
	for i := range dst {
		dst[i] = r.intN(V)
	}
}

// uniforms fills dst with uniform(), in index order.
func (r *genRNG) uniforms(dst []float64) {
	for i := range dst {
		dst[i] = r.uniform()
	}
}

// sampCategorical draws from softmax(row) by inverse CDF in float64, given
// one uniform u in [0, 1): with m = max(row), wᵥ = exp(float64(rowᵥ) − m)
// and S = Σ wᵥ (in index order), it returns the first v whose running sum
// w₀+…+wᵥ exceeds u·S. If rounding leaves no such v, it returns the last v
// with wᵥ > 0. Ids of probability zero (−∞ logits, or wᵥ underflowing to 0)
// are never returned.
func sampCategorical(row []float32, u float64) int {
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
