package codecs

import (
	"encoding/binary"
	"math"
)

// This file freezes the nvfp4 and q8 encoders as they were when they became
// the documented reference (commit d05db79), renamed with an "orig" suffix.
// The production encoders (reference Go code and SIMD paths) are tested to be
// bit-identical to them: codes, scales and statistics.

func nvfp4ScaleErrOrig(a *[16]float32, sc uint8, scale2 float32) float32 {
	s8 := E4M3ToFloat32(sc)
	den := float32(s8 * scale2)
	var e float32
	if !(den > 0) {
		for _, v := range a {
			e += float32(v * v)
		}
		return e
	}
	inv := 1 / den
	var lv [8]float32
	for i := range lv {
		lv[i] = float32(e2m1Values[i]*s8) * scale2
	}
	for _, v := range a {
		t := v * inv
		i := b2u(t > 0.25) + b2u(t >= 0.75) + b2u(t > 1.25) + b2u(t >= 1.75) +
			b2u(t > 2.5) + b2u(t >= 3.5) + b2u(t > 5)
		d := v - lv[i&7]
		e += float32(d * d)
	}
	return e
}

func e2m1CodeOrig(v float32) uint8 {
	a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
	i := b2u(a > 0.25) + b2u(a >= 0.75) + b2u(a > 1.25) + b2u(a >= 1.75) +
		b2u(a > 2.5) + b2u(a >= 3.5) + b2u(a > 5)
	return i | b2u(v < 0 && i != 0)<<3
}

func nvfp4BlockOrig(x *[16]float32, scale2 float32, codes *[16]uint8) uint8 {
	var a [16]float32
	var amax float32
	for j, v := range x {
		a[j] = math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
		amax = max(amax, a[j])
	}
	sc := Float32ToE4M3(amax / float32(6*scale2))
	if amax > 0 {
		best, be := sc, nvfp4ScaleErrOrig(&a, sc, scale2)
		for _, c := range [2]int{int(sc) - 1, int(sc) + 1} {
			if c < 0 || c > e4m3MaxCode {
				continue
			}
			if e := nvfp4ScaleErrOrig(&a, uint8(c), scale2); e < be {
				best, be = uint8(c), e
			}
		}
		sc = best
	}
	den := float32(E4M3ToFloat32(sc) * scale2)
	for j, v := range x {
		codes[j] = 0
		if den != 0 {
			codes[j] = e2m1CodeOrig(v / den)
		}
	}
	return sc
}

// encodeNVFP4Orig encodes n rows (the source must be finite).
func encodeNVFP4Orig(dt DType, scale2 float32, k int64, codes, scales, src []byte, n int64) Stats {
	es := int64(dt.Size())
	var x [16]float32
	var c [16]uint8
	var st Stats
	for b := range n * k / 16 {
		toFloat32(dt, src[b*16*es:], x[:])
		sc := nvfp4BlockOrig(&x, scale2, &c)
		scales[b] = sc
		for j := 0; j < 16; j += 2 {
			codes[b*8+int64(j/2)] = c[j] | c[j+1]<<4
		}
		s8 := E4M3ToFloat32(sc)
		for j, v := range x {
			st.add(float32(e2m1Values[c[j]]*s8)*scale2, v)
		}
	}
	return st
}

func q8CodeOrig(v, inv float32) float32 {
	t := v * inv
	if !(t > -127) {
		t = -127
	}
	if !(t < 127) {
		t = 127
	}
	r := t + 12582912
	return r - 12582912
}

func q8ErrOrig(x []float32, s float32) float64 {
	var inv float32
	if s != 0 {
		inv = 1 / s
	}
	var e0, e1, e2, e3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		d0 := float32(q8CodeOrig(x[i], inv)*s) - x[i]
		d1 := float32(q8CodeOrig(x[i+1], inv)*s) - x[i+1]
		d2 := float32(q8CodeOrig(x[i+2], inv)*s) - x[i+2]
		d3 := float32(q8CodeOrig(x[i+3], inv)*s) - x[i+3]
		e0 += float32(d0 * d0)
		e1 += float32(d1 * d1)
		e2 += float32(d2 * d2)
		e3 += float32(d3 * d3)
	}
	for ; i < len(x); i++ {
		d := float32(q8CodeOrig(x[i], inv)*s) - x[i]
		e0 += float32(d * d)
	}
	return float64(e0) + float64(e1) + float64(e2) + float64(e3)
}

func q8RefitOrig(x []float32, s float32) float32 {
	if s == 0 {
		return 0
	}
	inv := 1 / s
	var qx, qq float64
	for _, v := range x {
		q := q8CodeOrig(v, inv)
		qx += float64(q) * float64(v)
		qq += float64(q) * float64(q)
	}
	if qq == 0 {
		return s
	}
	return float32(qx / qq)
}

func q8ValidScaleOrig(s float32) bool {
	return s > 0 && float32(127*s) <= math.MaxFloat32 && 1/s <= math.MaxFloat32
}

func q8ScaleOrig(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31)); a > amax {
			amax = a
		}
	}
	if amax == 0 {
		return 0
	}
	base := amax / 127
	for base > 0 && float32(127*base) > math.MaxFloat32 {
		base = math.Nextafter32(base, 0)
	}
	if !q8ValidScaleOrig(base) {
		return 0
	}
	bestS, bestE := base, q8ErrOrig(x, base)
	bestF := float32(1)
	try := func(s float32) {
		if !q8ValidScaleOrig(s) {
			return
		}
		if e := q8ErrOrig(x, s); e < bestE {
			bestS, bestE = s, e
		}
	}
	for _, f := range []float32{0.9, 0.8, 0.7} {
		s := f * base
		if !q8ValidScaleOrig(s) {
			continue
		}
		if e := q8ErrOrig(x, s); e < bestE {
			bestS, bestE, bestF = s, e, f
		}
	}
	for _, d := range []float32{-0.05, 0.05} {
		if f := bestF + d; f > 0 && f <= 1 {
			try(f * base)
		}
	}
	for range 2 {
		try(q8RefitOrig(x, bestS))
	}
	return bestS
}

// encodeQ8Orig encodes n rows (the source must be finite).
func encodeQ8Orig(dt DType, k int64, codes, scales, src []byte, n int64) Stats {
	x := make([]float32, k)
	var st Stats
	es := int64(dt.Size())
	for r := range n {
		toFloat32(dt, src[r*k*es:], x)
		s := q8ScaleOrig(x)
		binary.LittleEndian.PutUint32(scales[4*r:], math.Float32bits(s))
		var inv float32
		if s != 0 {
			inv = 1 / s
		}
		row := codes[r*k : (r+1)*k]
		for i, v := range x {
			q := q8CodeOrig(v, inv)
			row[i] = byte(int8(q))
			st.add(float32(q*s), v)
		}
	}
	return st
}
