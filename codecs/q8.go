package codecs

import (
	"encoding/binary"
	"math"
)

// q8 is per-row symmetric int8: dec = float32(code)·scale with one float32
// scale per row and codes in [-127, 127]. The encoder searches the row
// scale: clipping factors f ∈ {1, 0.9, 0.8, 0.7} (scale = f·amax/127), then
// f ± 0.05 around the best, then two least-squares refits s = Σqx/Σq²; the
// candidate with the smallest squared error on the row wins (amax/127
// first, so it is kept on ties).

var (
	q8Coarse = [...]float32{1, 0.9, 0.8, 0.7}
	q8Fine   = [...]float32{-0.05, 0.05}
)

// rneSigned rounds t to the nearest integer, ties to even (|t| < 2^22).
func rneSigned(t float32) float32 {
	r := t + 12582912
	return r - 12582912
}

// q8Code is the code of v for scale inverse inv.
func q8Code(v, inv float32) float32 {
	t := v * inv
	if !(t > -127) {
		t = -127
	}
	if !(t < 127) {
		t = 127
	}
	return rneSigned(t)
}

// q8Err is the squared error of the row under scale s.
func q8Err(x []float32, s float32) float64 {
	var inv float32
	if s != 0 {
		inv = 1 / s
	}
	var e0, e1, e2, e3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		d0 := float32(q8Code(x[i], inv)*s) - x[i]
		d1 := float32(q8Code(x[i+1], inv)*s) - x[i+1]
		d2 := float32(q8Code(x[i+2], inv)*s) - x[i+2]
		d3 := float32(q8Code(x[i+3], inv)*s) - x[i+3]
		e0 += float32(d0 * d0)
		e1 += float32(d1 * d1)
		e2 += float32(d2 * d2)
		e3 += float32(d3 * d3)
	}
	for ; i < len(x); i++ {
		d := float32(q8Code(x[i], inv)*s) - x[i]
		e0 += float32(d * d)
	}
	return float64(e0) + float64(e1) + float64(e2) + float64(e3)
}

// q8Refit is the least-squares symmetric scale for the codes of scale s.
func q8Refit(x []float32, s float32) float32 {
	if s == 0 {
		return 0
	}
	inv := 1 / s
	var qx, qq float64
	for _, v := range x {
		q := q8Code(v, inv)
		qx += float64(q) * float64(v)
		qq += float64(q) * float64(q)
	}
	if qq == 0 {
		return s
	}
	return float32(qx / qq)
}

// q8ValidScale: s is positive, finite and has a finite inverse.
func q8ValidScale(s float32) bool {
	return s > 0 && float32(127*s) <= math.MaxFloat32 && 1/s <= math.MaxFloat32
}

// q8Base is the first candidate scale amax/127 (kept finite with its
// multiple 127·scale), and whether it is a valid scale; rows below ~2^-120
// encode as zeros.
func q8Base(amax float32) (float32, bool) {
	if amax == 0 {
		return 0, false
	}
	base := amax / 127
	for base > 0 && float32(127*base) > math.MaxFloat32 {
		base = math.Nextafter32(base, 0) // keep ±127·scale finite
	}
	return base, q8ValidScale(base)
}

// q8Scale searches the row scale.
func q8Scale(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31)); a > amax {
			amax = a
		}
	}
	base, ok := q8Base(amax)
	if !ok {
		return 0
	}
	bestS, bestE := base, q8Err(x, base)
	bestF := float32(1)
	try := func(s float32) {
		if !q8ValidScale(s) {
			return
		}
		if e := q8Err(x, s); e < bestE {
			bestS, bestE = s, e
		}
	}
	for _, f := range q8Coarse[1:] {
		s := f * base
		if !q8ValidScale(s) {
			continue
		}
		if e := q8Err(x, s); e < bestE {
			bestS, bestE, bestF = s, e, f
		}
	}
	for _, d := range q8Fine {
		if f := bestF + d; f > 0 && f <= 1 {
			try(f * base)
		}
	}
	for range 2 {
		try(q8Refit(x, bestS))
	}
	return bestS
}

// q8ErrFrom finishes q8Err(x, s) given its four chains e after the
// elements x[:n] (n a multiple of 4).
func q8ErrFrom(x []float32, n int, s float32, e *[4]float32) float64 {
	inv := 1 / s
	i := n
	for ; i+4 <= len(x); i += 4 {
		for k := range 4 {
			d := float32(q8Code(x[i+k], inv)*s) - x[i+k]
			e[k] += float32(d * d)
		}
	}
	for ; i < len(x); i++ {
		d := float32(q8Code(x[i], inv)*s) - x[i]
		e[0] += float32(d * d)
	}
	return float64(e[0]) + float64(e[1]) + float64(e[2]) + float64(e[3])
}

// q8SumsExact reports whether every partial sum of q8Refit's Σq·x over a
// row is exact (so that any summation order gives its result): all terms
// are multiples of the smallest ulp 2^L of the nonzero elements (mnz is the
// smallest nonzero |x| bit pattern) and Σ|q·x| ≤ 127·k·amax stays below
// 2^52·2^L.
func q8SumsExact(k int, amax float32, mnz uint32, dt DType) bool {
	ef := int(mnz >> 23)
	if ef == 0 {
		ef = 1
	}
	l := ef - 150 // ulp of a full float32 significand
	switch dt {
	case BF16:
		l += 16 // the low 16 significand bits are 0
	case F16:
		l += 13
	}
	return 127*float64(k)*float64(amax) <= math.Ldexp(1, 52+l)
}

// encodeQ8 encodes n rows.
func encodeQ8(e *Encoder, codes, scales, src []byte, r0, n int64) (Stats, error) {
	k := e.m.K
	if i := firstNonFinite(e.dt, src); i >= 0 {
		return Stats{}, nonFiniteAt(r0, k, int64(i))
	}
	x := make([]float32, k)
	var st Stats
	es := int64(e.dt.Size())
	for r := range n {
		rsrc := src[r*k*es : (r+1)*k*es]
		row := codes[r*k : (r+1)*k]
		var s float32
		if q8Fast != nil {
			s = q8Fast(e.dt, rsrc, x, row, &st)
		} else {
			toFloat32(e.dt, rsrc, x)
			s = q8Scale(x)
			var inv float32
			if s != 0 {
				inv = 1 / s
			}
			q8EncodeTail(x, 0, s, inv, row, &st)
		}
		binary.LittleEndian.PutUint32(scales[4*r:], math.Float32bits(s))
	}
	return st, nil
}

// q8EncodeTail writes the codes of x[i0:] for scale s (inverse inv, 0 for
// s = 0) and adds their statistics to st.
func q8EncodeTail(x []float32, i0 int, s, inv float32, codes []byte, st *Stats) {
	for i := i0; i < len(x); i++ {
		q := q8Code(x[i], inv)
		codes[i] = byte(int8(q))
		st.add(float32(q*s), x[i])
	}
}

// decodeQ8 decodes rows [r0, r0+n) of a whole encoded q8 tensor.
func decodeQ8(planes []Plane, k int64, enc []byte, r0, n int64, dst []float32) {
	codes := enc[planes[0].Offset:]
	scales := enc[planes[1].Offset:]
	for r := range n {
		s := math.Float32frombits(binary.LittleEndian.Uint32(scales[4*(r0+r):]))
		row := codes[(r0+r)*k : (r0+r+1)*k]
		out := dst[r*k : (r+1)*k]
		for i, c := range row {
			out[i] = float32(int8(c)) * s
		}
	}
}
