// Package testmat generates the seeded synthetic weight matrices that the
// codecs tests, benchmarks and codecbench measure on.
package testmat

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// Std is the standard deviation of every generated matrix.
const Std = 0.02

// Dist names a distribution.
type Dist string

const (
	Gaussian Dist = "gauss" // N(0, Std²)
	StudentT Dist = "t3"    // Student-t with 3 degrees of freedom, scaled to std Std
)

// Dists lists the distributions in report order.
var Dists = []Dist{Gaussian, StudentT}

// Values returns n float32 samples of d from a PCG stream seeded by seed.
func Values(d Dist, n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]float32, n)
	for i := range out {
		switch d {
		case StudentT:
			var chi float64
			for range 3 {
				g := r.NormFloat64()
				chi += g * g
			}
			// t3 has variance 3: divide by sqrt(3) to get unit variance.
			out[i] = float32(r.NormFloat64() / math.Sqrt(chi/3) / math.Sqrt(3) * Std)
		default:
			out[i] = float32(r.NormFloat64() * Std)
		}
	}
	return out
}

// BF16 returns n samples of d rounded to bfloat16, as little-endian bytes.
func BF16(d Dist, n int, seed uint64) []byte {
	v := Values(d, n, seed)
	out := make([]byte, 2*n)
	for i, f := range v {
		u := math.Float32bits(f)
		u += 0x7fff + (u>>16)&1
		binary.LittleEndian.PutUint16(out[2*i:], uint16(u>>16))
	}
	return out
}
