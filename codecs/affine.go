package codecs

import (
	"encoding/binary"
	"math"
)

// q4/q5/q6: group-32 affine along K. For each group of 32 consecutive
// elements of a row: dec = float32(code)·scale + bias, with scale and bias
// stored as fp16 and codes b bits wide (0..2^b−1), evaluated in float32 as
// t = float32(code)·scale (rounded), dec = t + bias (rounded); no FMA.
//
// The encoder (affineGroup) searches (scale, bias) per group:
//
//  1. four candidate grids, each a step and a low end derived from the
//     group's min/max (full range; 0.97 of the range anchored at the min and
//     at the max; 0.88 of it, centred);
//  2. for each, the codes are computed and the least-squares (scale, bias)
//     for those codes is solved in closed form (2×2 normal equations); the
//     candidate with the smallest predicted error is kept;
//  3. that (scale, bias) is rounded to fp16 and the codes recomputed with it,
//     then refitted once more by least squares, rounded and requantized; of
//     the two the one with the smaller true squared error (after fp16
//     rounding) wins.
//
// Every operation is float32 with a fixed order, so the SIMD kernel that
// processes 16 groups at once (one per lane) reproduces it bit for bit.

// affineWide is the |x| above which a group bypasses the search (values that
// fp16 cannot represent anyway) and is encoded by plain min/max in float64.
const affineWide = 65536

// affineParams are the constants of the search for one code width; they
// are read by the assembly kernel too (keep the layout).
type affineParams struct {
	nmax float32    // 2^b − 1
	a    [4]float32 // candidate low end: lo = min + a·range
	c    [4]float32 // candidate inverse step: inv = c / range
}

func newAffineParams(bits int) affineParams {
	n := float32(int(1)<<bits - 1)
	return affineParams{
		nmax: n,
		a:    [4]float32{0, 0, 0.03, 0.06},
		c:    [4]float32{n, n / 0.97, n / 0.97, n / 0.88},
	}
}

// groupResult is the outcome of one group: the fp16 scale and bias and the
// float64 error terms of the decoded group.
type groupResult struct {
	scale, bias uint16
	sumSqErr    float64
	sumSqRef    float64
	maxAbsErr   float64
}

// rneCode rounds t ∈ [0, 2^22) to the nearest integer, ties to even.
func rneCode(t float32) float32 {
	r := t + 8388608
	return r - 8388608
}

// affineCode is the code for t = (x − bias)·inv, clamped to [0, nmax]. The
// clamp order matches MAXPS/MINPS (a NaN t becomes nmax).
func affineCode(t, nmax float32) float32 {
	if !(t > 0) {
		t = 0
	}
	if !(t < nmax) {
		t = nmax
	}
	return rneCode(t)
}

// half rounds v to fp16 after clamping it to ±65504 (saturating).
func half(v float32) (float32, uint16) {
	if !(v > -65504) {
		v = -65504
	}
	if !(v < 65504) {
		v = 65504
	}
	h := Float32ToF16(v)
	return F16ToFloat32(h), h
}

// lsSolve fits (s, b) minimizing Σ(q·s + b − x)² over 32 elements given the
// sums Σq, Σq², Σqx, Σx, Σx², and predicts the resulting squared error.
func lsSolve(sq, sqq, sqx, sx, sxx float32) (s, b, e float32) {
	d := float32(32*sqq) - float32(sq*sq)
	num := float32(32*sqx) - float32(sq*sx)
	if d > 0 {
		s = num / d
	}
	b = float32(sx-float32(s*sq)) * (1.0 / 32)
	e = float32(sxx-float32(s*sqx)) - float32(b*sx)
	return s, b, e
}

func invStep(s float32) float32 {
	if s != 0 {
		return 1 / s
	}
	return 0
}

// exactPass requantizes x with (s, b) and returns the squared error and the
// least-squares sums of the codes.
func exactPass(x *[32]float32, s, b, nmax float32) (e, sq, sqq, sqx float32) {
	inv := invStep(s)
	for _, v := range x {
		q := affineCode(float32(v-b)*inv, nmax)
		d := float32(q*s) + b
		d -= v
		e += float32(d * d)
		sq += q
		sqq += float32(q * q)
		sqx += float32(q * v)
	}
	return e, sq, sqq, sqx
}

// affineSearch returns the chosen (scale, bias), rounded to fp16, for a
// group whose values are finite with |x| ≤ affineWide.
func affineSearch(p *affineParams, x *[32]float32) (s, b float32) {
	mn, mx := x[0], x[0]
	var sx, sxx float32
	for _, v := range x {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
		sx += v
		sxx += float32(v * v)
	}
	rng := mx - mn
	var lo, inv, sq, sqq, sqx [4]float32
	for k := range 4 {
		lo[k] = mn + float32(p.a[k]*rng)
		if rng > 0 {
			inv[k] = p.c[k] / rng
		}
	}
	for _, v := range x {
		for k := range 4 {
			q := affineCode(float32(v-lo[k])*inv[k], p.nmax)
			sq[k] += q
			sqq[k] += float32(q * q)
			sqx[k] += float32(q * v)
		}
	}
	bs, bb, be := lsSolve(sq[0], sqq[0], sqx[0], sx, sxx)
	for k := 1; k < 4; k++ {
		if s, b, e := lsSolve(sq[k], sqq[k], sqx[k], sx, sxx); e < be {
			bs, bb, be = s, b, e
		}
	}
	s1, _ := half(bs)
	b1, _ := half(bb)
	e1, q1, qq1, qx1 := exactPass(x, s1, b1, p.nmax)
	s2, b2, _ := lsSolve(q1, qq1, qx1, sx, sxx)
	s2, _ = half(s2)
	b2, _ = half(b2)
	if e2, _, _, _ := exactPass(x, s2, b2, p.nmax); e2 < e1 {
		return s2, b2
	}
	return s1, b1
}

// affineWideParams is the fallback for groups with |x| > affineWide: plain
// min/max computed in float64, scale and bias saturated to fp16.
func affineWideParams(p *affineParams, x *[32]float32) (s, b float32) {
	mn, mx := float64(x[0]), float64(x[0])
	for _, v := range x {
		mn = min(mn, float64(v))
		mx = max(mx, float64(v))
	}
	s, _ = half(float32(math.Min((mx-mn)/float64(p.nmax), 65504)))
	b, _ = half(float32(math.Max(mn, -65504)))
	return s, b
}

// affineGroup encodes one finite group: codes receives the codes, the
// result the fp16 scale/bias and the error terms (float64, j in order).
func affineGroup(p *affineParams, x *[32]float32, codes *[32]uint8) groupResult {
	var s, b float32
	amax := float32(0)
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax <= affineWide {
		s, b = affineSearch(p, x)
	} else {
		s, b = affineWideParams(p, x)
	}
	r := groupResult{scale: Float32ToF16(s), bias: Float32ToF16(b)}
	inv := invStep(s)
	for j, v := range x {
		q := affineCode(float32(v-b)*inv, p.nmax)
		codes[j] = uint8(q)
		d := float32(q*s) + b
		e := float64(d) - float64(v)
		r.sumSqErr += e * e
		r.sumSqRef += float64(v) * float64(v)
		r.maxAbsErr = max(r.maxAbsErr, math.Abs(e))
	}
	return r
}

// packCodes writes 32 codes of width bits as an LSB-first bit string into
// out (4·bits bytes).
func packCodes(out []byte, codes *[32]uint8, bits int) {
	out = out[:4*bits]
	var acc uint64
	nacc, o := 0, 0
	for _, c := range codes {
		acc |= uint64(c) << nacc
		nacc += bits
		for nacc >= 8 {
			out[o] = byte(acc)
			o++
			acc >>= 8
			nacc -= 8
		}
	}
}

// unpackCodes is the inverse of packCodes.
func unpackCodes(in []byte, codes *[32]uint8, bits int) {
	in = in[:4*bits]
	mask := uint64(1)<<bits - 1
	var acc uint64
	nacc, i := 0, 0
	for j := range codes {
		for nacc < bits {
			acc |= uint64(in[i]) << nacc
			i++
			nacc += 8
		}
		codes[j] = uint8(acc & mask)
		acc >>= bits
		nacc -= bits
	}
}

// encodeAffine encodes n rows of q4/q5/q6.
func encodeAffine(e *Encoder, codes, scales, biases, src []byte, r0, n int64) (Stats, error) {
	groups := n * e.m.K / 32
	var st Stats
	var g0 int64
	if affineFast != nil && e.dt != DTypeInvalid {
		done, err := affineFast(e, codes, scales, biases, src, r0, groups, &st)
		if err != nil {
			return Stats{}, err
		}
		g0 = done
	}
	for g := g0; g < groups; g++ {
		r, err := affineScalarGroup(e, codes, scales, biases, src, r0, g)
		if err != nil {
			return Stats{}, err
		}
		st.mergeGroup(r)
	}
	return st, nil
}

// affineScalarGroup encodes flat group g of the block with the reference
// code, reporting non-finite values.
func affineScalarGroup(e *Encoder, codes, scales, biases, src []byte, r0, g int64) (groupResult, error) {
	es := int64(e.dt.Size())
	gsrc := src[g*32*es : (g+1)*32*es]
	if i := firstNonFinite(e.dt, gsrc); i >= 0 {
		return groupResult{}, nonFiniteAt(r0, e.m.K, g*32+int64(i))
	}
	var x [32]float32
	var c [32]uint8
	toFloat32(e.dt, gsrc, x[:])
	r := affineGroup(&e.aff, &x, &c)
	bits := int64(e.f.Bits())
	packCodes(codes[g*4*bits:], &c, int(bits))
	binary.LittleEndian.PutUint16(scales[2*g:], r.scale)
	binary.LittleEndian.PutUint16(biases[2*g:], r.bias)
	return r, nil
}

// mergeGroup adds one group's terms (groups are merged in order).
func (s *Stats) mergeGroup(r groupResult) {
	s.SumSqErr += r.sumSqErr
	s.SumSqRef += r.sumSqRef
	s.MaxAbsErr = max(s.MaxAbsErr, r.maxAbsErr)
	s.N += 32
}

// decodeAffine decodes rows [r0, r0+n) of a whole encoded q4/q5/q6 tensor.
func decodeAffine(f Format, planes []Plane, k int64, enc []byte, r0, n int64, dst []float32) {
	bits := int64(f.Bits())
	gpr := k / 32
	codes := enc[planes[0].Offset:]
	scales := enc[planes[1].Offset:]
	biases := enc[planes[2].Offset:]
	var c [32]uint8
	for g := range n * gpr {
		fg := r0*gpr + g
		unpackCodes(codes[fg*4*bits:], &c, int(bits))
		s := F16ToFloat32(binary.LittleEndian.Uint16(scales[2*fg:]))
		b := F16ToFloat32(binary.LittleEndian.Uint16(biases[2*fg:]))
		out := dst[g*32 : g*32+32]
		for j, q := range c {
			out[j] = float32(float32(q)*s) + b
		}
	}
}
