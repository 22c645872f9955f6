// Package baseline holds the plain min/max group-32 affine quantizer that
// the codecs encoders are measured against (MLX-style, as measured in
// ANCHORS §13): scale = (max−min)/(2^b−1), bias = min, both rounded to fp16,
// code = clamp(round((x−bias16)/scale16)), dec = code·scale16 + bias16.
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
			d := float32(q*s) + b
			out[g+j] = d
			e := float64(d) - float64(v)
			st.SumSqErr += e * e
			st.SumSqRef += float64(v) * float64(v)
			st.MaxAbsErr = max(st.MaxAbsErr, math.Abs(e))
			st.N++
		}
	}
	return st
}
