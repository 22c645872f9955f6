// Package baseline holds reference quantizers that the codecs encoders are
// measured against, as fake quantization in float32. The main baseline of
// the searching encoders is the original engine's own min/max encoder,
// which the codecs package itself provides (codecs.MinMax); this package
// adds what the codecs package does not encode:
//
//   - ModelOpt: NVFP4 with the plain ModelOpt scale choice (the searching
//     nvfp4 encoder without its neighbouring-scale refinement).
package baseline

import (
	"math"

	"github.com/dgq-dev/dgq/codecs"
)

// ModelOpt fake-quantizes x (one matrix, a multiple of 16 values) with
// plain ModelOpt NVFP4 into out and returns the decoded values' error
// statistics against x: scale_2 = amax/(6·448) (1 when that is 0), block
// scale = E4M3(amax_block/(6·scale_2)), nearest E2M1 code of x/(s8·scale_2),
// decoded as (e2m1·s8)·scale_2.
func ModelOpt(x []float32, out []float32) codecs.Stats {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	s2 := amax / (6 * 448)
	if s2 == 0 {
		s2 = 1
	}
	var st codecs.Stats
	for b := 0; b+16 <= len(x); b += 16 {
		var bmax float32
		for _, v := range x[b : b+16] {
			bmax = max(bmax, float32(math.Abs(float64(v))))
		}
		s8 := codecs.E4M3ToFloat32(codecs.Float32ToE4M3(bmax / (6 * s2)))
		den := s8 * s2
		for j, v := range x[b : b+16] {
			var c uint8
			if den != 0 {
				c = codecs.E2M1Code(v / den)
			}
			out[b+j] = codecs.E2M1ToFloat32(c) * s8 * s2
			account(&st, out[b+j], v)
		}
	}
	return st
}

func account(st *codecs.Stats, dec, src float32) {
	e := float64(dec) - float64(src)
	st.SumSqErr += e * e
	st.SumSqRef += float64(src) * float64(src)
	st.MaxAbsErr = max(st.MaxAbsErr, math.Abs(e))
	st.N++
}
