// Package baseline holds the plain (search-free) quantizers that the codecs
// encoders are measured against, as fake quantization in float32:
//
//   - MinMax: group-32 affine, MLX/ggml Q4_1-style: scale = (max−min)/(2^b−1),
//     bias = min, both rounded to fp16, code = clamp(round((x−bias16)/scale16)),
//     dec = code·scale16 + bias16;
//   - RowAmax: per-row symmetric int8 with scale = amax/127;
//   - ModelOpt: NVFP4 with the plain ModelOpt scale choice.
package baseline

import (
	"math"

	"github.com/dgq-dev/dgq/codecs"
)

// MinMax fake-quantizes x (a multiple of 32 values) in place of out and
// returns the decoded values' error statistics against x.
func MinMax(x []float32, bits int, out []float32) codecs.Stats {
	nmax := float32(int(1)<<bits - 1)
	var st codecs.Stats
	for g := 0; g+32 <= len(x); g += 32 {
		grp := x[g : g+32]
		mn, mx := grp[0], grp[0]
		for _, v := range grp {
			mn = min(mn, v)
			mx = max(mx, v)
		}
		s := codecs.F16ToFloat32(codecs.Float32ToF16((mx - mn) / nmax))
		b := codecs.F16ToFloat32(codecs.Float32ToF16(mn))
		for j, v := range grp {
			var q float32
			if s != 0 {
				q = float32(math.RoundToEven(float64((v - b) / s)))
				q = min(max(q, 0), nmax)
			}
			out[g+j] = float32(q*s) + b
			account(&st, out[g+j], v)
		}
	}
	return st
}

// RowAmax fake-quantizes x (rows of k values) with per-row symmetric int8
// and scale = amax/127 (no search), like the q8 format without its search.
func RowAmax(x []float32, k int, out []float32) codecs.Stats {
	var st codecs.Stats
	for r := 0; r+k <= len(x); r += k {
		row := x[r : r+k]
		var amax float32
		for _, v := range row {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := amax / 127
		for j, v := range row {
			var q float32
			if s != 0 {
				q = float32(math.RoundToEven(float64(v / s)))
			}
			out[r+j] = q * s
			account(&st, out[r+j], v)
		}
	}
	return st
}

// ModelOpt fake-quantizes x with plain ModelOpt NVFP4: scale_2 =
// amax/(6·448), block scale = E4M3(amax_block/(6·scale_2)), nearest E2M1.
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
