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
//  1. three candidate grids, each a step and a low end derived from the
//     group's min/max (the full range; 0.97 of the range anchored at the min;
//     0.97 of it anchored at the max);
//  2. for each, the codes are computed and the least-squares (scale, bias)
//     for those codes is solved in closed form (2×2 normal equations); the
//     candidate with the smallest predicted error is kept;
//  3. that (scale, bias) is rounded to fp16, the codes are recomputed with
//     it, and (scale, bias) is refitted once more by least squares for those
//     codes and rounded to fp16: this is the result. (Comparing the true
//     error of the two rounded fits and keeping the better one changed the
//     rel RMSE of the test matrices in the fifth digit, so it is not done.)
//
// A code is always the exactly rounded (nearest, ties to even) value of
// (x − low end)·inv, where the subtraction is rounded to float32 and the
// product is exact (computed in float64), clamped to [0, 2^b−1].
//
// Every operation is float32 with a fixed order, so the SIMD kernel that
// processes 16 groups at once (one per lane) reproduces it bit for bit.

// affineWide is the |x| above which a group bypasses the search (values that
// fp16 cannot represent anyway) and is encoded by plain min/max in float64.
const affineWide = 65536

// minRange is the smallest group range searched; below it (where c/range
// could overflow) every code is 0 and the bias is the group mean.
const minRange = 0x1p-100

// affineParams are the constants of the search for one code width; they
// are read by the assembly kernel too (keep the layout).
type affineParams struct {
	nmax float32    // 2^b − 1
	a    [3]float32 // candidate low end: lo = min + a·range
	c    [3]float32 // candidate inverse step: inv = c / range
	idx  [16]int32  // byte offset of group g's codes in a batch of 16 (SIMD scatter)
}

func newAffineParams(bits int) affineParams {
	n := float32(int(1)<<bits - 1)
	p := affineParams{
		nmax: n,
		a:    [3]float32{0, 0, 0.03},
		c:    [3]float32{n, n / 0.97, n / 0.97},
	}
	for g := range p.idx {
		p.idx[g] = int32(g * 4 * bits)
	}
	return p
}

// groupResult is the outcome of one group: the fp16 scale and bias and the
// float64 error terms of the decoded group.
type groupResult struct {
	scale, bias uint16
	sumSqErr    float64
	sumSqRef    float64
	maxAbsErr   float64
}

// affineCode is the code for d·inv: the exact product rounded to the
// nearest integer (ties to even), clamped to [0, nmax]. d and inv are
// finite, so the float64 product is exact and finite.
func affineCode(d, inv, nmax float32) float32 {
	t := math.RoundToEven(float64(d) * float64(inv))
	if t < 0 {
		t = 0
	}
	if t > float64(nmax) {
		t = float64(nmax)
	}
	return float32(t)
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

// codeSums requantizes x with (s, b) and returns the least-squares sums of
// the codes.
func codeSums(x *[32]float32, s, b, nmax float32) (sq, sqq, sqx float32) {
	inv := invStep(s)
	for _, v := range x {
		q := affineCode(v-b, inv, nmax)
		sq += q
		sqq += float32(q * q)
		sqx += float32(q * v)
	}
	return sq, sqq, sqx
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
	var lo, inv, sq, sqq, sqx [3]float32
	for k := range 3 {
		lo[k] = mn + float32(p.a[k]*rng)
		if rng > minRange {
			inv[k] = p.c[k] / rng
		}
	}
	for _, v := range x {
		for k := range 3 {
			q := affineCode(v-lo[k], inv[k], p.nmax)
			sq[k] += q
			sqq[k] += float32(q * q)
			sqx[k] += float32(q * v)
		}
	}
	bs, bb, be := lsSolve(sq[0], sqq[0], sqx[0], sx, sxx)
	for k := 1; k < 3; k++ {
		if s, b, e := lsSolve(sq[k], sqq[k], sqx[k], sx, sxx); e < be {
			bs, bb, be = s, b, e
		}
	}
	s1, _ := half(bs)
	b1, _ := half(bb)
	q1, qq1, qx1 := codeSums(x, s1, b1, p.nmax)
	s, b, _ = lsSolve(q1, qq1, qx1, sx, sxx)
	s, _ = half(s)
	b, _ = half(b)
	return s, b
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
		q := affineCode(v-b, inv, p.nmax)
		codes[j] = uint8(q)
		d := float32(q*s) + b
		e := float64(d) - float64(v)
		r.sumSqErr += float64(e * e)
		r.sumSqRef += float64(float64(v) * float64(v))
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
	if r.maxAbsErr > s.MaxAbsErr {
		s.MaxAbsErr = r.maxAbsErr
	}
	s.N += 32
}

// decodeAffine decodes rows [r0, r0+n) of a whole encoded q4/q5/q6 tensor.
func decodeAffine(f Format, planes []Plane, k int64, enc []byte, r0, n int64, dst []float32) {
	bits := uint(f.Bits())
	gb := int64(4 * bits)
	gpr := k / 32
	codes := enc[planes[0].Offset:]
	scales := enc[planes[1].Offset:]
	biases := enc[planes[2].Offset:]
	mask := uint64(1)<<bits - 1
	var pad [32]byte // the group's codes, padded so 8-byte reads stay inside
	for g := range n * gpr {
		fg := r0*gpr + g
		copy(pad[:], codes[fg*gb:fg*gb+gb])
		s := F16ToFloat32(binary.LittleEndian.Uint16(scales[2*fg:]))
		b := F16ToFloat32(binary.LittleEndian.Uint16(biases[2*fg:]))
		out := dst[g*32 : g*32+32]
		for j := range out {
			pos := uint(j) * bits
			q := binary.LittleEndian.Uint64(pad[(pos>>3)&31:]) >> (pos & 7) & mask
			out[j] = float32(float32(q)*s) + b
		}
	}
}
