package codecs

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// nvfp4_block: every matrix (each expert of a 3-D stack) starts with its
// float32 scale g; then every row is [K/2 bytes of E2M1 codes, element 2j in
// the low nibble of byte j][K/16 E4M3 block scales]. An element decodes as
// float32(float32(e2m1·s)·g) with s its block's scale.
//
// The searching encoder sets g from the matrix's amax as ModelOpt's
// weight_scale_2 does, so block scales use E4M3's whole normal range:
//
//	g    = amax(matrix) / (6·448)      (1 when that is 0 or not finite)
//	s    = E4M3(amax(block) / (6·g))   (RNE, saturating at 448)
//	code = E2M1(x / (s·g))             (nearest, ties to the even code, saturating at 6)
//
// The encoder improves on plain ModelOpt by also trying the two E4M3 codes
// next to s for every block and keeping the one with the smallest squared
// error (ties keep s); the errors of the three candidates are estimated with
// codes chosen by multiplying with the reciprocal of s·scale_2, the final
// codes use the exact division above. A block scale of 0 decodes the whole
// block to 0 (all codes 0).
//
// With importance weights (Encoder.SetImportance) the same three candidates
// are judged by a weighted estimate instead (nvfp4BlockW below); g, the
// candidates, their order and the codes are unchanged.

// e2m1Values are the values of the 16 E2M1 codes (code = sign<<3 | index).
var e2m1Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6}

func init() { e2m1Values[8] = float32(math.Copysign(0, -1)) }

// E2M1Code rounds v to the nearest E2M1 value with ties to the even code,
// saturating at ±6; the result is sign<<3 | magnitude index. Zero
// magnitudes get code 0 (no negative zero); NaN gives 0.
func E2M1Code(v float32) uint8 {
	a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
	// Thresholds are the midpoints; ">" sends a tie down, ">=" up, so that
	// every tie lands on the even index.
	i := e2m1Index(a)
	return i | b2u(v < 0 && i != 0)<<3
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// E2M1ToFloat32 decodes the low nibble of c.
func E2M1ToFloat32(c uint8) float32 { return e2m1Values[c&15] }

// nvfp4Scale2 is the global scale for a tensor amax.
func nvfp4Scale2(amax float32) float32 {
	s := amax / (6 * E4M3Max)
	if !(s > 0) || s > math.MaxFloat32 {
		return 1
	}
	return s
}

// nvfp4Levels are the decoded magnitudes of the 8 E2M1 indexes for block
// scale s8: float32(float32(e2m1·s8)·scale_2), exactly as decoded.
func nvfp4Levels(s8, scale2 float32) (lv [8]float32) {
	for i := range lv {
		lv[i] = float32(e2m1Values[i]*s8) * scale2
	}
	return lv
}

// e2m1Index is the magnitude index of E2M1Code for a ≥ 0 (or NaN → 0).
func e2m1Index(a float32) uint8 {
	return b2u(a > 0.25) + b2u(a >= 0.75) + b2u(a > 1.25) + b2u(a >= 1.75) +
		b2u(a > 2.5) + b2u(a >= 3.5) + b2u(a > 5)
}

// e2m1Round returns the E2M1 magnitude nearest to t ≥ 0 (not NaN), with
// ties on the even code, and its index: the value e2m1Index and E2M1Code
// give. t is clamped to 6 and M = 2^22·2^e, e = ⌊log2 max(t,1)⌋ ∈ {0,1,2},
// is added and subtracted, which rounds t to a multiple of 0.5, 1 or 2 with
// ties to even; the index is the number of those steps in t + M (2r, r or
// r/2) plus 2e.
func e2m1Round(t float32) (float32, uint8) {
	// For t ≥ 0 the bit patterns order like the values: clamp them
	// (branch-free).
	tb := min(math.Float32bits(t), 0x40c00000)    // min(t, 6)
	mb := max(tb, 0x3f800000)&0x7f800000 + 22<<23 // M
	big := math.Float32frombits(mb)
	u := math.Float32frombits(tb) + big
	return u - big, uint8(math.Float32bits(u)&15 + mb>>22 - 298)
}

// nvfp4ScaleErr estimates the squared error of a block (magnitudes a) under
// scale code sc, picking codes with a multiply by the reciprocal (the final
// codes use the exact division).
func nvfp4ScaleErr(a *[16]float32, sc uint8, scale2 float32) float32 {
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
	if inv > math.MaxFloat32 { // v·inv may be 0·Inf = NaN: compare with the midpoints
		lv := nvfp4Levels(s8, scale2)
		for _, v := range a {
			d := v - lv[e2m1Index(v*inv)&7]
			e += float32(d * d)
		}
		return e
	}
	for _, v := range a {
		r, _ := e2m1Round(v * inv) // v·inv is finite or +Inf
		d := v - float32(float32(r*s8)*scale2)
		e += float32(d * d)
	}
	return e
}

// nvfp4Block encodes one 16-element block: it returns the E4M3 scale code
// and fills codes. The ModelOpt scale is tried first, then its two
// neighbouring codes; strictly smaller estimated error wins.
func nvfp4Block(x *[16]float32, scale2 float32, codes *[16]uint8) uint8 {
	return nvfp4BlockSearch(x, nil, scale2, codes)
}

// Importance-weighted nvfp4 blocks (nvfp4BlockW). The candidates, their
// order, the codes of a candidate and the final codes are those of
// nvfp4Block; only the estimated error a candidate is judged by changes, to
//
//	Σ_j float32(v_j · float32(d_j·d_j))   (float32 sum in element order)
//
// with d_j the error nvfp4ScaleErr computes for element j and v_j the
// block's normalized weights: with w_j the weights as float32 and m their
// maximum, v_j = w_j·2^−e, e = ⌊log2 m⌋, rounded to float32 (so the largest
// v_j lies in [1, 2): a product is less than twice the unweighted term, so
// weights of any magnitude overflow no sooner than the unweighted estimate
// within a factor 2, and the choice is that of the weights w_j up to
// rounding).
//
// A block whose 16 weights are all equal is judged unweighted (v_j = 1,
// which gives nvfp4Block's sums bit for bit), so uniform weights give
// exactly the unweighted encoding.

// nvfp4BlockW is nvfp4Block with the weights w (float32 values > 0) of the
// block's elements.
func nvfp4BlockW(x *[16]float32, w *[16]float32, scale2 float32, codes *[16]uint8) uint8 {
	v, uniform := nvfp4NormWeights(w)
	if uniform {
		return nvfp4BlockSearch(x, nil, scale2, codes)
	}
	return nvfp4BlockSearch(x, &v, scale2, codes)
}

// nvfp4NormWeights returns the normalized weights of a block (see above)
// and whether its weights are all equal.
func nvfp4NormWeights(w *[16]float32) (v [16]float32, uniform bool) {
	m, lo := w[0], w[0]
	for _, u := range w {
		m, lo = max(m, u), min(lo, u)
	}
	if m == lo {
		return v, true
	}
	// e = ⌊log2 m⌋ from the bits (m > 0 is normal or subnormal); u·2^−e is
	// exact in float64 and rounded once to float32.
	mb := math.Float32bits(m)
	e := int(mb>>23) - 127
	if mb>>23 == 0 {
		e = bits.Len32(mb) - 150
	}
	p := math.Float64frombits(uint64(1023-e) << 52)
	for j, u := range w {
		v[j] = float32(float64(u) * p)
	}
	return v, false
}

// nvfp4BlockSearch is the block search, unweighted when v is nil, else
// judging candidates by the error weighted with the normalized weights v.
func nvfp4BlockSearch(x *[16]float32, v *[16]float32, scale2 float32, codes *[16]uint8) uint8 {
	var a [16]float32
	var amax float32
	for j, u := range x {
		a[j] = math.Float32frombits(math.Float32bits(u) &^ (1 << 31))
		amax = max(amax, a[j])
	}
	sc := Float32ToE4M3(amax / float32(6*scale2))
	if amax > 0 {
		best, be := sc, nvfp4CandErr(&a, v, sc, scale2)
		for _, c := range [2]int{int(sc) - 1, int(sc) + 1} {
			if c < 0 || c > e4m3MaxCode {
				continue
			}
			if e := nvfp4CandErr(&a, v, uint8(c), scale2); e < be {
				best, be = uint8(c), e
			}
		}
		sc = best
	}
	den := float32(E4M3ToFloat32(sc) * scale2)
	for j, u := range x {
		codes[j] = 0
		if den != 0 {
			// E2M1Code(u / den): |u/den| = a/den is finite or +Inf.
			_, i := e2m1Round(a[j] / den)
			codes[j] = i | b2u(u < 0 && i != 0)<<3
		}
	}
	return sc
}

// nvfp4CandErr is the error a candidate scale code is judged by:
// nvfp4ScaleErr, or nvfp4ScaleErrW with the normalized weights v.
func nvfp4CandErr(a, v *[16]float32, sc uint8, scale2 float32) float32 {
	if v != nil {
		return nvfp4ScaleErrW(a, v, sc, scale2)
	}
	return nvfp4ScaleErr(a, sc, scale2)
}

// nvfp4ScaleErrW is nvfp4ScaleErr with every squared error multiplied by
// the element's normalized weight v_j (rounded to float32) before the sum.
func nvfp4ScaleErrW(a, v *[16]float32, sc uint8, scale2 float32) float32 {
	s8 := E4M3ToFloat32(sc)
	den := float32(s8 * scale2)
	var e float32
	if !(den > 0) {
		for j, u := range a {
			e += float32(v[j] * float32(u*u))
		}
		return e
	}
	inv := 1 / den
	if inv > math.MaxFloat32 {
		lv := nvfp4Levels(s8, scale2)
		for j, u := range a {
			d := u - lv[e2m1Index(u*inv)&7]
			e += float32(v[j] * float32(d*d))
		}
		return e
	}
	for j, u := range a {
		r, _ := e2m1Round(u * inv)
		d := u - float32(float32(r*s8)*scale2)
		e += float32(v[j] * float32(d*d))
	}
	return e
}

// nvfp4FastW, when non-nil, is a SIMD implementation of the weighted
// nvfp4 row search, bit-identical to the reference (nvfp4BlockW and the
// statistics of encodeNVFP4RowW): like nvfp4Fast, with the prepared
// weights pw of the row's blocks.
var nvfp4FastW func(g float32, codes, scales []byte, x []float32, pw *nvfp4Weights, st *Stats) int

// nvfp4MatrixScale reads the f32 scale at the start of a matrix.
func nvfp4MatrixScale(b []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// encodeNVFP4Row encodes one row of finite values x of a matrix whose
// stored scale is g into row.
func encodeNVFP4Row(method Method, g float32, row []byte, x []float32, sc *scratch, st *Stats) {
	k := len(x)
	codes, scales := row[:k/2], row[k/2:k/2+k/16]
	if method == MinMax {
		for b := 0; b < k/16; b++ {
			minmaxNVFP4Block((*[16]float32)(x[b*16:]), codes[b*8:b*8+8], &scales[b])
		}
		nvfp4RowStats(row, x, g, sc.floats(len(x)), st)
		return
	}
	var b0 int
	if nvfp4Fast != nil {
		b0 = nvfp4Fast(g, codes, scales, x, st)
	}
	for b := b0; b < k/16; b++ {
		var c [16]uint8
		blk := (*[16]float32)(x[b*16:])
		sc := nvfp4Block(blk, g, &c)
		scales[b] = sc
		for j := 0; j < 16; j += 2 {
			codes[b*8+j/2] = c[j] | c[j+1]<<4
		}
		s8 := E4M3ToFloat32(sc)
		for j, v := range blk {
			st.add(float32(e2m1Values[c[j]]*s8)*g, v)
		}
	}
}

// nvfp4RowStats adds the error of an encoded row against x (dec: len(x)
// values of scratch).
func nvfp4RowStats(row []byte, x []float32, g float32, dec []float32, st *Stats) {
	decodeNVFP4Row(g, row, dec)
	for i, v := range x {
		st.add(dec[i], v)
	}
}

// minmaxNVFP4Block is the engine's block encoder (matrix scale 1): block
// scale E4M3(amax/6), codes E2M1(x/s) with the engine's E2M1 rounding,
// which keeps the sign of small negative values (code 8, −0).
func minmaxNVFP4Block(x *[16]float32, codes []byte, scale *uint8) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	var sf float32
	if !(amax < 1e-12) {
		sf = amax / 6
	}
	*scale = Float32ToE4M3(sf)
	s := E4M3ToFloat32(*scale)
	for j := 0; j < 16; j += 2 {
		var lo, hi uint8
		if s != 0 {
			lo, hi = e2m1Signed(x[j]/s), e2m1Signed(x[j+1]/s)
		}
		codes[j/2] = lo | hi<<4
	}
}

// e2m1Signed is E2M1 rounding that keeps the sign bit of every negative
// value, zero included (the engine's e2m1_from_f32).
func e2m1Signed(v float32) uint8 {
	a := math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
	return e2m1Index(a) | uint8(math.Float32bits(v)>>31)<<3
}

// decodeNVFP4Row decodes one encoded row of a matrix with scale g.
func decodeNVFP4Row(g float32, row []byte, dst []float32) {
	k := len(dst)
	codes, scales := row[:k/2], row[k/2:]
	for b := 0; b < k/16; b++ {
		s8 := E4M3ToFloat32(scales[b])
		out := dst[b*16 : b*16+16]
		for j := range 8 {
			c := codes[b*8+j]
			out[2*j] = float32(float32(e2m1Values[c&15]*s8) * g)
			out[2*j+1] = float32(float32(e2m1Values[c>>4]*s8) * g)
		}
	}
}
