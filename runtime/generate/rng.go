package generate

import (
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
