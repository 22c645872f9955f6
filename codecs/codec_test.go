package codecs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

var (
	allDTypes  = []DType{BF16, F16, F32}
	allMethods = []Method{Search, MinMax}
)

// ---------------------------------------------------------------------------
// Sources

// fromFloat32 rounds values to dt (round to nearest even) and returns the
// little-endian bytes.
func fromFloat32(dt DType, x []float32) []byte {
	out := make([]byte, len(x)*dt.Size())
	for i, v := range x {
		switch dt {
		case BF16:
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToBF16(v))
		case F16:
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToF16(v))
		case F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	}
	return out
}

// gaussSource returns n N(0, 0.02²) values rounded to dt, as bytes.
func gaussSource(seed uint64, dt DType, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	return fromFloat32(dt, x)
}

// randomSource makes n elements of dtype dt with assorted hard cases per
// group of 16: constant groups, zeros of both signs, tiny and large values,
// outliers, values on a grid (rounding ties), ranges below 2^-100.
func randomSource(r *rand.Rand, dt DType, n int) []byte {
	x := make([]float32, n)
	for g := 0; g < n; g += 16 {
		kind := r.IntN(12)
		scale := float32(math.Pow(10, r.Float64()*8-6))
		for j := g; j < min(g+16, n); j++ {
			v := float32(r.NormFloat64()) * scale
			switch kind {
			case 0:
				v = scale // constant group
			case 1:
				v = float32(math.Copysign(0, float64(r.IntN(2)-1)))
			case 2:
				if r.IntN(8) == 0 {
					v *= 100 // outliers
				}
			case 3:
				v *= 1e-6
			case 4:
				if r.IntN(16) == 0 {
					v = 70000
				}
			case 5, 6:
				v = float32(r.IntN(kind*3)) * scale // on a grid: rounding ties
			case 7:
				v = float32(r.IntN(3)-1) * 0x1p-110 // range below 2^-100
			}
			if dt == F16 && math.Abs(float64(v)) > 65504 {
				v = 65504
			}
			x[j] = v
		}
	}
	return fromFloat32(dt, x)
}

// sourceFloats widens source bytes to float32 (exact).
func sourceFloats(t testing.TB, dt DType, src []byte) []float32 {
	t.Helper()
	x := make([]float32, len(src)/dt.Size())
	if err := ToFloat32(dt, src, x); err != nil {
		t.Fatal(err)
	}
	return x
}

func mustFlatten(t testing.TB, shape []int64) Matrix {
	t.Helper()
	m, err := FlattenShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustEncode(t testing.TB, f Format, dt DType, m Matrix, method Method, src []byte) ([]byte, Stats) {
	t.Helper()
	enc, st, err := EncodeTensor(f, dt, m, method, src)
	if err != nil {
		t.Fatalf("EncodeTensor %s %s %s %+v: %v", f, dt, method, m, err)
	}
	return enc, st
}

func decodeAll(t testing.TB, f Format, dt DType, m Matrix, enc []byte) []float32 {
	t.Helper()
	dec := make([]float32, m.Elements())
	if err := DecodeRows(f, dt, m, enc, 0, m.Rows, dec); err != nil {
		t.Fatal(err)
	}
	return dec
}

// ---------------------------------------------------------------------------
// Statistics

// statsOf computes Stats of dec against x as the package documents them
// (err = float64(dec) − float64(src), float64 squares and sums; a NaN error
// never becomes MaxAbsErr), independently of the encoder.
func statsOf(dec, x []float32) Stats {
	var s Stats
	for i, v := range x {
		e := float64(dec[i]) - float64(v)
		s.SumSqErr += e * e
		s.SumSqRef += float64(v) * float64(v)
		if a := math.Abs(e); a > s.MaxAbsErr {
			s.MaxAbsErr = a
		}
		s.N++
	}
	return s
}

// statsClose compares encoder statistics with recomputed ones. N and
// MaxAbsErr (a max, independent of order) must be equal. SumSqErr and
// SumSqRef are sums of the same N non-negative float64 terms, possibly
// added in a different order (per group, per chunk, merged): each order is
// within (N−1)·2^-53 of the exact sum relatively, so two orders differ by
// less than N·2^-52 relatively. NaN equals NaN (a decode NaN gives NaN sums
// on both sides).
func statsClose(a, b Stats) bool {
	if a.N != b.N || !sameFloat(a.MaxAbsErr, b.MaxAbsErr) {
		return false
	}
	tol := float64(max(a.N, 1)) * 0x1p-52
	return closeRel(a.SumSqErr, b.SumSqErr, tol) && closeRel(a.SumSqRef, b.SumSqRef, tol)
}

func sameFloat(a, b float64) bool { return a == b || a != a && b != b }

func closeRel(a, b, tol float64) bool {
	if sameFloat(a, b) {
		return true
	}
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}

// sameStats is bit-for-bit equality.
func sameStats(a, b Stats) bool {
	return math.Float64bits(a.SumSqErr) == math.Float64bits(b.SumSqErr) &&
		math.Float64bits(a.SumSqRef) == math.Float64bits(b.SumSqRef) &&
		math.Float64bits(a.MaxAbsErr) == math.Float64bits(b.MaxAbsErr) && a.N == b.N
}

// ---------------------------------------------------------------------------
// Error bounds
//
// Two bounds are checked for every quantized element, both derived from the
// format (not measured):
//
// Grid bound (from the stored parameters). The stored parameters of a group
// (q4/q5/q6: bf16 delta d and min m; q8: bf16 scale s; nvfp4: E4M3 block
// scale s8 and f32 matrix scale g) define the set G of values its codes can
// decode to, computed here exactly as the decoder does. An encoder picks
// each code as the nearest grid point of the parameters it works with, so
// |dec − x| ≤ dist(x, G) + paramSlack + f32Slack·(magnitudes):
//   - paramSlack: MinMax (the engine) picks q4/q5/q6 and q8 codes with the
//     unrounded float32 parameters δ, μ and stores them truncated to bf16,
//     so |δ − d| < ulp(d) and |μ − m| < ulp(m) (truncation stays in the
//     binade); the grid G* of (δ, μ) is within nmax·ulp(d) + ulp(m) of G
//     point by point, hence |dec − x| ≤ |G(q) − G*(q)| + dist(x, G*) ≤
//     dist(x, G) + 2·nmax·ulp(d) + 2·ulp(m) (q8: 2·127·ulp(s), no min).
//     Search is held to the same bound: its contract (score candidates after
//     rounding the parameters to what is stored) allows codes chosen for
//     parameters one bf16 rounding away from the stored ones. nvfp4 codes
//     are picked with the stored scales by both methods: paramSlack = 0.
//   - f32 rounding: choosing the code costs at most two float32 roundings of
//     (x − μ)/δ (≤ 2^-23·(|x|+|μ|) in x units) and the decoder two roundings
//     of values ≤ nmax·d + |m| (≤ 2^-23 of that, and as much again between
//     the real and the float32 grid): ≤ 2^-22·(|x| + |m| + ulp(m) + nmax·(d +
//     ulp(d))). f32Slack = 2^-21 doubles that, to admit any equivalent float32
//     formulation of the code choice (e.g. a multiply by a rounded reciprocal).
//     tinySlack covers float32 rounding near underflow (8 subnormal ulps).
//
// Magnitude bound (from the source only). What the engine's min/max
// parameters guarantee for the group:
//   - q4/q5/q6 (nmax = 2^b − 1): range r = max − min; r < 1e-8 → all codes 0
//     and the min truncated: |err| ≤ r + ulp(min); else δ = r/nmax, the
//     codes are within δ/2 of x for δ and μ, and truncation moves a value by
//     at most nmax·ulp(δ) + ulp(min): |err| ≤ δ/2 + nmax·ulp(δ) + ulp(min).
//   - q8: amax < 1e-8 → codes 0, |err| = |x| ≤ amax; else s = amax/127,
//     |err| ≤ s/2 + 127·ulp(s).
//   - nvfp4 (block amax a, matrix scale g): t = a/(6g) rounded to E4M3 is s
//     with |s − t| ≤ max(2^-4·t, 2^-10) (half an ulp of 3 mantissa bits;
//     half the 2^-9 subnormal step), saturated at 448. E2M1's largest gap is
//     2 (between 4 and 6), so an unclipped element is within s·g of its
//     code, a clipped one within a − 6·s·g: |err| ≤ max(g·s_hi, a − 6·g·s_lo)
//     (s_lo = 0 gives |err| ≤ a, the all-zero block).
//
// MinMax must meet the magnitude bound on every element. Search minimizes
// the squared error, so it must meet it in the root mean square over the
// group (row for q8, block for nvfp4): its candidates include the min/max
// parameters or better ones (nvfp4: the ModelOpt scale or a neighbour with
// a smaller squared error).
//
// A q4/q5/q6 group whose float32 range max − min overflows has no finite
// min/max delta: the engine's encoder would store delta = +Inf and the group
// would decode to NaN, so MinMax refuses it (ErrRange); for Search every
// decoded value must be finite (a NaN has no squared error to minimize, and
// finite candidates exist).

const (
	f32Slack  = 0x1p-21
	tinySlack = 0x1p-146
)

// ulpBF16 is the spacing of bf16 values at |v|: 2^(E−7) for exponent E,
// 2^-133 for subnormals and zero.
func ulpBF16(v float32) float64 {
	e := int(math.Float32bits(v)>>23) & 0xff
	return math.Ldexp(1, max(e, 1)-127-7)
}

// gridDist is the distance from x to the nearest value of a sorted grid
// (NaN when the grid holds a NaN).
func gridDist(grid []float64, x float32) float64 {
	if slices.ContainsFunc(grid, math.IsNaN) {
		return math.NaN()
	}
	v := float64(x)
	i, _ := slices.BinarySearch(grid, v)
	d := math.Inf(1)
	for _, j := range []int{i - 1, i} {
		if j >= 0 && j < len(grid) {
			d = min(d, math.Abs(grid[j]-v))
		}
	}
	return d
}

func absf(v float32) float64 { return math.Abs(float64(v)) }

// boundChecker collects violations (a few are reported in full).
type boundChecker struct {
	t    testing.TB
	name string
	row  int64
	n    int
}

func (c *boundChecker) fail(format string, args ...any) {
	c.t.Helper()
	c.n++
	if c.n <= 5 {
		where := c.name
		if c.row >= 0 {
			where = fmt.Sprintf("%s: row %d", c.name, c.row)
		}
		c.t.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
}

// checkRoundTrip decodes enc and checks it against src: Stats equal to
// the recomputed ones, raw bit-exact, the grid and magnitude bounds above,
// no NaN or infinity where a finite result is required, and row-by-row
// decoding equal to the whole decode.
func checkRoundTrip(t testing.TB, name string, f Format, method Method, dt DType, m Matrix, src, enc []byte, st Stats) {
	t.Helper()
	c := &boundChecker{t: t, name: name, row: -1}
	x := sourceFloats(t, dt, src)
	dec := decodeAll(t, f, dt, m, enc)
	if got := statsOf(dec, x); !statsClose(st, got) {
		c.fail("encoder stats %+v, recomputed from DecodeRows %+v", st, got)
	}
	l, err := f.Layout(dt, m)
	if err != nil {
		t.Fatal(err)
	}
	if f == Raw {
		if !bytes.Equal(enc, src) {
			c.fail("raw encoding is not the source bytes")
		}
		for i := range x {
			if math.Float32bits(dec[i]) != math.Float32bits(x[i]) {
				c.fail("raw element %d decodes to %g, source %g", i, dec[i], x[i])
			}
		}
		return
	}
	for r := range m.Rows {
		c.row = r
		off := l.RowOffset(r)
		row := enc[off : off+l.RowBytes]
		xs, ds := x[r*m.K:(r+1)*m.K], dec[r*m.K:(r+1)*m.K]
		switch f {
		case Q4, Q5, Q6:
			checkAffine(c, method, f.Bits(), xs, ds, row)
		case Q8:
			checkQ8(c, method, xs, ds, row)
		case NVFP4:
			mat := r / l.MatRows * (l.HeaderBytes + l.MatRows*l.RowBytes)
			g := math.Float32frombits(binary.LittleEndian.Uint32(enc[mat:]))
			checkNVFP4(c, method, g, xs, ds, row)
		}
	}
	// Rows decoded one at a time equal the whole decode.
	one := make([]float32, m.K)
	for r := range m.Rows {
		c.row = r
		if err := DecodeRows(f, dt, m, enc, r, 1, one); err != nil {
			t.Fatal(err)
		}
		for j, v := range one {
			if math.Float32bits(v) != math.Float32bits(dec[r*m.K+int64(j)]) {
				c.fail("column %d: row decode %g, whole decode %g", j, v, dec[r*m.K+int64(j)])
				break
			}
		}
	}
}

func checkAffine(c *boundChecker, method Method, bits int, x, dec []float32, row []byte) {
	c.t.Helper()
	nmax := 1<<bits - 1
	bb := 4 + 4*bits
	grid := make([]float64, nmax+1)
	for g := 0; g*32 < len(x); g++ {
		xs, ds := x[g*32:g*32+32], dec[g*32:g*32+32]
		d := BF16ToFloat32(binary.LittleEndian.Uint16(row[g*bb:]))
		m := BF16ToFloat32(binary.LittleEndian.Uint16(row[g*bb+2:]))
		mn, mx := xs[0], xs[0]
		var amax float32
		for _, v := range xs {
			mn, mx = min(mn, v), max(mx, v)
			amax = max(amax, float32(absf(v)))
		}
		rng := mx - mn
		if math.IsInf(float64(rng), 1) { // no finite min/max delta (see above)
			if method == Search {
				for j, v := range ds {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						c.fail("group %d (float32 range overflows) element %d: search decodes %g", g, j, v)
					}
				}
			}
			continue
		}
		for q := range grid {
			grid[q] = float64(float32(float32(q)*d) + m)
		}
		slices.Sort(grid)
		ud, um := ulpBF16(d), ulpBF16(m)
		paramSlack := 2*float64(nmax)*ud + 2*um
		var bmm float64 // magnitude bound
		if rng < 1e-8 {
			bmm = float64(rng) + ulpBF16(mn)
		} else {
			delta := rng / float32(nmax)
			bmm = float64(delta)/2 + float64(nmax)*ulpBF16(delta) + ulpBF16(mn)
		}
		srcSlack := f32Slack*(float64(amax)+absf(mn)+float64(rng)) + tinySlack
		var sse float64
		for j, v := range xs {
			err := math.Abs(float64(ds[j]) - float64(v))
			slack := f32Slack*(absf(v)+absf(m)+um+float64(nmax)*(absf(d)+ud)) + tinySlack
			if b := gridDist(grid, v) + paramSlack + slack; !(err <= b) {
				c.fail("group %d element %d: x=%g decodes to %g (d=%g m=%g): |err| %g > grid bound %g", g, j, v, ds[j], d, m, err, b)
			}
			if method == MinMax && !(err <= bmm+srcSlack) {
				c.fail("group %d element %d: x=%g decodes to %g: |err| %g > min/max bound %g", g, j, v, ds[j], err, bmm+srcSlack)
			}
			sse += err * err
		}
		if rms := math.Sqrt(sse / 32); !(rms <= bmm+srcSlack) {
			c.fail("group %d: rms error %g > min/max bound %g (d=%g m=%g)", g, rms, bmm+srcSlack, d, m)
		}
	}
}

func checkQ8(c *boundChecker, method Method, x, dec []float32, row []byte) {
	c.t.Helper()
	s := BF16ToFloat32(binary.LittleEndian.Uint16(row))
	grid := make([]float64, 255)
	for q := range grid {
		grid[q] = float64(float32(q-127) * s)
	}
	slices.Sort(grid)
	us := ulpBF16(s)
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(absf(v)))
	}
	var bmm float64
	if amax < 1e-8 {
		bmm = float64(amax)
	} else {
		sc := amax / 127
		bmm = float64(sc)/2 + 127*ulpBF16(sc)
	}
	srcSlack := f32Slack*2*float64(amax) + tinySlack
	var sse float64
	for j, v := range x {
		err := math.Abs(float64(dec[j]) - float64(v))
		slack := f32Slack*(absf(v)+127*(absf(s)+us)) + tinySlack
		if b := gridDist(grid, v) + 2*127*us + slack; !(err <= b) {
			c.fail("element %d: x=%g decodes to %g (s=%g): |err| %g > grid bound %g", j, v, dec[j], s, err, b)
		}
		if method == MinMax && !(err <= bmm+srcSlack) {
			c.fail("element %d: x=%g decodes to %g: |err| %g > min/max bound %g", j, v, dec[j], err, bmm+srcSlack)
		}
		sse += err * err
	}
	if len(x) > 0 {
		if rms := math.Sqrt(sse / float64(len(x))); !(rms <= bmm+srcSlack) {
			c.fail("row rms error %g > min/max bound %g (s=%g)", rms, bmm+srcSlack, s)
		}
	}
}

func checkNVFP4(c *boundChecker, method Method, g float32, x, dec []float32, row []byte) {
	c.t.Helper()
	k := len(x)
	scales := row[k/2 : k/2+k/16]
	grid := make([]float64, 16)
	for b := range k / 16 {
		xs, ds := x[b*16:b*16+16], dec[b*16:b*16+16]
		s8 := E4M3ToFloat32(scales[b])
		for q := range grid {
			grid[q] = float64(float32(e2m1Values[q]*s8) * g)
		}
		slices.Sort(grid)
		var a float32
		for _, v := range xs {
			a = max(a, float32(absf(v)))
		}
		t := float64(a) / (6 * float64(g))
		h := max(t*0x1p-4, 0x1p-10)
		slo, shi := min(max(t-h, 0), E4M3Max), min(t+h, E4M3Max)
		bsrc := max(float64(g)*shi, float64(a)-6*float64(g)*slo)
		srcSlack := f32Slack*(float64(a)+6*float64(g)*shi) + tinySlack
		var sse float64
		for j, v := range xs {
			err := math.Abs(float64(ds[j]) - float64(v))
			slack := f32Slack*(absf(v)+6*absf(s8)*float64(g)) + tinySlack
			if bd := gridDist(grid, v) + slack; !(err <= bd) {
				c.fail("block %d element %d: x=%g decodes to %g (s8=%g g=%g): |err| %g > grid bound %g", b, j, v, ds[j], s8, g, err, bd)
			}
			if method == MinMax && !(err <= bsrc+srcSlack) {
				c.fail("block %d element %d: x=%g decodes to %g: |err| %g > scale bound %g", b, j, v, ds[j], err, bsrc+srcSlack)
			}
			sse += err * err
		}
		if rms := math.Sqrt(sse / 16); !(rms <= bsrc+srcSlack) {
			c.fail("block %d: rms error %g > scale bound %g (s8=%g g=%g)", b, rms, bsrc+srcSlack, s8, g)
		}
	}
}

// ---------------------------------------------------------------------------
// Names

func TestFormatNames(t *testing.T) {
	tests := []struct {
		f          Format
		name, kind string
		bits       int
	}{
		{Raw, "raw", "raw", 0},
		{Q8, "q8", "q8_row", 8},
		{Q4, "q4", "q4_block", 4},
		{Q5, "q5", "q5_block", 5},
		{Q6, "q6", "q6_block", 6},
		{NVFP4, "nvfp4", "nvfp4_block", 4},
	}
	var fs []Format
	for _, tc := range tests {
		fs = append(fs, tc.f)
		if tc.f.String() != tc.name || tc.f.Kind() != tc.kind || tc.f.Bits() != tc.bits || !tc.f.Valid() {
			t.Errorf("%d: String %q Kind %q Bits %d Valid %v, want %q %q %d true", tc.f, tc.f, tc.f.Kind(), tc.f.Bits(), tc.f.Valid(), tc.name, tc.kind, tc.bits)
		}
		if f, err := ParseKind(tc.kind); err != nil || f != tc.f {
			t.Errorf("ParseKind(%q) = %v, %v", tc.kind, f, err)
		}
		if f, err := ParseFormat(tc.name); err != nil || f != tc.f {
			t.Errorf("ParseFormat(%q) = %v, %v", tc.name, f, err)
		}
		b, err := tc.f.MarshalText()
		if err != nil || string(b) != tc.name {
			t.Errorf("%s MarshalText = %q, %v", tc.name, b, err)
		}
		var back Format
		if err := back.UnmarshalText(b); err != nil || back != tc.f {
			t.Errorf("UnmarshalText(%q) = %v, %v", b, back, err)
		}
		if tc.f.Quantized() != (tc.f != Raw) {
			t.Errorf("%s Quantized = %v", tc.f, tc.f.Quantized())
		}
	}
	if !slices.Equal(Formats(), fs) {
		t.Errorf("Formats() = %v, want %v", Formats(), fs)
	}
	for _, g := range []struct {
		f Format
		n int
	}{{Q4, 32}, {Q5, 32}, {Q6, 32}, {NVFP4, 16}, {Raw, 1}} {
		if g.f.GroupSize() != g.n {
			t.Errorf("%s GroupSize %d, want %d", g.f, g.f.GroupSize(), g.n)
		}
	}
}

func TestFormatNameErrors(t *testing.T) {
	for _, s := range []string{"", "Q4", "q4_block", "invalid", "bf16", "q4 ", "fp4"} {
		if _, err := ParseFormat(s); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("ParseFormat(%q): %v, want ErrUnknownFormat", s, err)
		}
		var f Format
		if err := f.UnmarshalText([]byte(s)); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("UnmarshalText(%q): %v, want ErrUnknownFormat", s, err)
		}
	}
	for _, s := range []string{"", "q4", "Q4_BLOCK", "invalid", "q8_block", "nvfp4", "raw "} {
		if _, err := ParseKind(s); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("ParseKind(%q): %v, want ErrUnknownFormat", s, err)
		}
	}
	for _, f := range []Format{FormatInvalid, Format(7), Format(255)} {
		if f.Valid() || f.Quantized() {
			t.Errorf("%v is valid", f)
		}
		if _, err := f.MarshalText(); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("%v MarshalText: %v, want ErrUnknownFormat", f, err)
		}
		if _, err := ParseKind(f.Kind()); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("Kind() of %v (%q) parses: %v", f, f.Kind(), err)
		}
		if err := f.CheckDims([]int64{2, 32}); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("%v CheckDims: %v, want ErrUnknownFormat", f, err)
		}
		if _, err := NewEncoder(f, BF16, Matrix{Rows: 2, K: 32}, MinMax); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("NewEncoder(%v): %v, want ErrUnknownFormat", f, err)
		}
	}
}

func TestMethodNames(t *testing.T) {
	for _, tc := range []struct {
		m    Method
		name string
	}{{Search, "search"}, {MinMax, "minmax"}} {
		if tc.m.String() != tc.name {
			t.Errorf("%d String %q, want %q", tc.m, tc.m, tc.name)
		}
		if m, err := ParseMethod(tc.name); err != nil || m != tc.m {
			t.Errorf("ParseMethod(%q) = %v, %v", tc.name, m, err)
		}
		b, err := tc.m.MarshalText()
		var back Method = 99
		if err != nil || back.UnmarshalText(b) != nil || back != tc.m {
			t.Errorf("%s text round trip: %q, %v -> %v", tc.name, b, err, back)
		}
	}
	for _, s := range []string{"", "Search", "min-max", "min/max", "ggml", "search "} {
		if _, err := ParseMethod(s); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("ParseMethod(%q): %v, want ErrUnknownMethod", s, err)
		}
		var m Method
		if err := m.UnmarshalText([]byte(s)); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("UnmarshalText(%q): %v, want ErrUnknownMethod", s, err)
		}
	}
	for _, m := range []Method{2, 7, 255} {
		if _, err := m.MarshalText(); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("Method(%d) MarshalText: %v, want ErrUnknownMethod", m, err)
		}
		if _, err := ParseMethod(m.String()); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("Method(%d).String() %q parses", m, m)
		}
		if _, err := NewEncoder(Q4, BF16, Matrix{Rows: 2, K: 32}, m); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("NewEncoder(method %d): %v, want ErrUnknownMethod", m, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Shapes and layouts

func TestCheckDims(t *testing.T) {
	type tc struct {
		f     Format
		shape []int64
		want  error // nil: accepted
	}
	rank9 := []int64{1, 1, 1, 1, 1, 1, 1, 1, 64}
	cases := []tc{
		{Raw, nil, nil},
		{Raw, []int64{5}, nil},
		{Raw, []int64{0}, nil},
		{Raw, []int64{0, 7}, nil},
		{Raw, []int64{3, 0}, nil},
		{Raw, []int64{2, 3, 5}, nil},
		{Raw, []int64{3, 33}, nil},
		{Raw, []int64{-1, 4}, ErrShape},
		{Raw, rank9, ErrShape},
		{Raw, []int64{1 << 62, 4}, ErrShape},
		{Raw, []int64{1 << 40, 1 << 40}, ErrShape},
		{FormatInvalid, []int64{2, 32}, ErrUnknownFormat},
		{Format(7), []int64{2, 32}, ErrUnknownFormat},
	}
	for _, f := range []Format{Q8, Q4, Q5, Q6, NVFP4} {
		cases = append(cases,
			tc{f, nil, ErrDims},               // rank 0
			tc{f, []int64{64}, ErrDims},       // rank 1
			tc{f, []int64{0, 64}, ErrDims},    // empty
			tc{f, []int64{4, 0}, ErrDims},     // empty rows
			tc{f, []int64{0, 4, 64}, ErrDims}, // no experts
			tc{f, []int64{3, 0, 64}, ErrDims}, // empty experts
			tc{f, []int64{4, 64}, nil},        // rank 2
			tc{f, []int64{3, 4, 64}, nil},     // expert stack
			tc{f, []int64{2, 3, 4, 64}, nil},  // rank 4
			tc{f, []int64{1, 96}, nil},        // one row
			tc{f, []int64{4, -64}, ErrShape},  // negative
			tc{f, []int64{-3, 4, 64}, ErrShape},
			tc{f, rank9, ErrShape},
			tc{f, []int64{1 << 40, 1 << 40}, ErrShape},
		)
	}
	for _, f := range []Format{Q4, Q5, Q6} {
		for _, k := range []int64{1, 16, 33, 48, 80} {
			cases = append(cases, tc{f, []int64{2, k}, ErrDims})
		}
		for _, k := range []int64{32, 96, 2816} {
			cases = append(cases, tc{f, []int64{2, k}, nil})
		}
	}
	for _, k := range []int64{1, 8, 24, 40} {
		cases = append(cases, tc{NVFP4, []int64{2, k}, ErrDims})
	}
	for _, k := range []int64{16, 48, 272, 2816} {
		cases = append(cases, tc{NVFP4, []int64{2, k}, nil})
	}
	for _, k := range []int64{1, 3, 5, 17, 2817} {
		cases = append(cases, tc{Q8, []int64{2, k}, nil})
	}
	for _, c := range cases {
		err := c.f.CheckDims(c.shape)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%v.CheckDims(%v) = %v, want %v", c.f, c.shape, err, c.want)
		}
	}
}

func TestFlattenShape(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		want  Matrix
	}{
		{nil, Matrix{Rows: 1, K: 1, Mats: 1}},
		{[]int64{7}, Matrix{Rows: 1, K: 7, Mats: 1}},
		{[]int64{3, 64}, Matrix{Rows: 3, K: 64, Mats: 1}},
		{[]int64{5, 3, 64}, Matrix{Rows: 15, K: 64, Mats: 5}},
		{[]int64{2, 5, 3, 64}, Matrix{Rows: 30, K: 64, Mats: 10}},
		{[]int64{128, 1408, 2816}, Matrix{Rows: 180224, K: 2816, Mats: 128}},
	} {
		m, err := FlattenShape(tc.shape)
		if err != nil || m != tc.want || m.Matrices() != tc.want.Mats {
			t.Errorf("FlattenShape(%v) = %+v, %v; want %+v", tc.shape, m, err, tc.want)
		}
	}
	if (Matrix{Rows: 4, K: 2}).Matrices() != 1 {
		t.Error("Mats 0 is not read as 1")
	}
}

// TestLayoutSizes: encoded sizes and geometry against the engine's sizes,
// worked by hand: q4 row K/32·20, q5 K/32·24 (dgq only), q6 K/32·28, q8
// 2+K, nvfp4 per matrix 4 + N·(K/2 + K/16), E matrices for a 3-D stack.
func TestLayoutSizes(t *testing.T) {
	for _, tc := range []struct {
		f     Format
		dt    DType
		shape []int64
		want  Layout
		size  int64
	}{
		{Q4, BF16, []int64{3, 64}, Layout{RowBytes: 40, MatRows: 3, Matrices: 1}, 120},
		{Q5, BF16, []int64{3, 64}, Layout{RowBytes: 48, MatRows: 3, Matrices: 1}, 144},
		{Q6, BF16, []int64{3, 64}, Layout{RowBytes: 56, MatRows: 3, Matrices: 1}, 168},
		{Q8, BF16, []int64{3, 64}, Layout{RowBytes: 66, MatRows: 3, Matrices: 1}, 198},
		{Q8, F32, []int64{2, 5}, Layout{RowBytes: 7, MatRows: 2, Matrices: 1}, 14},
		{NVFP4, BF16, []int64{3, 64}, Layout{RowBytes: 36, HeaderBytes: 4, MatRows: 3, Matrices: 1}, 112},
		{NVFP4, F16, []int64{2, 3, 32}, Layout{RowBytes: 18, HeaderBytes: 4, MatRows: 3, Matrices: 2}, 116},
		{NVFP4, BF16, []int64{2, 2, 3, 32}, Layout{RowBytes: 18, HeaderBytes: 4, MatRows: 3, Matrices: 4}, 232},
		{Q4, BF16, []int64{2, 3, 64}, Layout{RowBytes: 40, MatRows: 6, Matrices: 1}, 240},
		{Q6, F32, []int64{2, 3, 64}, Layout{RowBytes: 56, MatRows: 6, Matrices: 1}, 336},
		{Raw, BF16, []int64{3, 5}, Layout{RowBytes: 10, MatRows: 3, Matrices: 1}, 30},
		{Raw, F32, []int64{7}, Layout{RowBytes: 28, MatRows: 1, Matrices: 1}, 28},
		{Raw, BF16, nil, Layout{RowBytes: 2, MatRows: 1, Matrices: 1}, 2},
		{Raw, F16, []int64{4, 0}, Layout{RowBytes: 0, MatRows: 4, Matrices: 1}, 0},
		// One DiffusionGemma expert stack (gate_up, 128 experts of 1408×2816).
		{Q4, BF16, []int64{128, 1408, 2816}, Layout{RowBytes: 1760, MatRows: 180224, Matrices: 1}, 317194240},
		{Q5, BF16, []int64{128, 1408, 2816}, Layout{RowBytes: 2112, MatRows: 180224, Matrices: 1}, 380633088},
		{Q6, BF16, []int64{128, 1408, 2816}, Layout{RowBytes: 2464, MatRows: 180224, Matrices: 1}, 444071936},
		{NVFP4, BF16, []int64{128, 1408, 2816}, Layout{RowBytes: 1584, HeaderBytes: 4, MatRows: 1408, Matrices: 128}, 285475328},
		{Q8, BF16, []int64{1408, 2816}, Layout{RowBytes: 2818, MatRows: 1408, Matrices: 1}, 3967744},
	} {
		m := mustFlatten(t, tc.shape)
		l, err := tc.f.Layout(tc.dt, m)
		if err != nil || l != tc.want || l.Size() != tc.size {
			t.Errorf("%s %s %v: layout %+v size %d (%v), want %+v size %d", tc.f, tc.dt, tc.shape, l, l.Size(), err, tc.want, tc.size)
		}
		if n, err := tc.f.EncodedSize(tc.dt, m); err != nil || n != tc.size {
			t.Errorf("%s %v: EncodedSize %d, %v, want %d", tc.f, tc.shape, n, err, tc.size)
		}
		if rb, err := tc.f.RowBytes(tc.dt, m.K); err != nil || rb != tc.want.RowBytes {
			t.Errorf("%s %v: RowBytes %d, %v", tc.f, tc.shape, rb, err)
		}
		if tc.f.HeaderBytes() != tc.want.HeaderBytes {
			t.Errorf("%s HeaderBytes %d", tc.f, tc.f.HeaderBytes())
		}
	}
	// The formulas over a sweep of shapes.
	r := rand.New(rand.NewPCG(4, 4))
	for range 200 {
		e, n, k := r.Int64N(5)+1, r.Int64N(40)+1, (r.Int64N(12)+1)*32
		shape := []int64{e, n, k}
		m := mustFlatten(t, shape)
		for f, want := range map[Format]int64{
			Q4:    e * n * k / 32 * 20,
			Q5:    e * n * k / 32 * 24,
			Q6:    e * n * k / 32 * 28,
			Q8:    e * n * (2 + k),
			NVFP4: e * (4 + n*(k/2+k/16)),
			Raw:   e * n * k * 2,
		} {
			if got, err := f.EncodedSize(BF16, m); err != nil || got != want {
				t.Fatalf("%s %v: %d, %v, want %d", f, shape, got, err, want)
			}
		}
	}
	// Row offsets of a 2×3×32 nvfp4 stack (matrices of 4 + 3·18 = 58 bytes).
	l, _ := NVFP4.Layout(BF16, mustFlatten(t, []int64{2, 3, 32}))
	for r, want := range []int64{4, 22, 40, 62, 80, 98} {
		if got := l.RowOffset(int64(r)); got != want {
			t.Errorf("nvfp4 2x3x32 row %d offset %d, want %d", r, got, want)
		}
	}
}

func TestLayoutErrors(t *testing.T) {
	for name, err := range map[string]error{
		"q4 K 48":            second(Q4.RowBytes(BF16, 48)),
		"q6 K 16":            second(Q6.RowBytes(BF16, 16)),
		"nvfp4 K 24":         second(NVFP4.RowBytes(BF16, 24)),
		"nvfp4 matrix":       second(NVFP4.Layout(BF16, Matrix{Rows: 4, K: 24})),
		"q5 matrix":          second(Q5.Layout(F32, Matrix{Rows: 4, K: 40})),
		"q4 encoded size":    second(Q4.EncodedSize(BF16, Matrix{Rows: 4, K: 40})),
		"nvfp4 encoder":      second(NewEncoder(NVFP4, BF16, Matrix{Rows: 2, K: 24}, Search)),
		"q4 encoder":         second(NewEncoder(Q4, F16, Matrix{Rows: 2, K: 48}, MinMax)),
		"q6 encode tensor":   third(EncodeTensor(Q6, BF16, Matrix{Rows: 1, K: 16}, MinMax, make([]byte, 32))),
		"nvfp4 decode rows":  DecodeRows(NVFP4, BF16, Matrix{Rows: 1, K: 8}, make([]byte, 9), 0, 1, make([]float32, 8)),
		"q5 decode rows":     DecodeRows(Q5, BF16, Matrix{Rows: 1, K: 16}, make([]byte, 12), 0, 1, make([]float32, 16)),
		"q4 K not multiple":  second(Q4.EncodedSize(F32, Matrix{Rows: 3, K: 100})),
		"nvfp4 K 8 encoded":  second(NVFP4.EncodedSize(F32, Matrix{Rows: 3, K: 8})),
		"nvfp4 stack K 40":   second(NVFP4.Layout(BF16, Matrix{Rows: 6, K: 40, Mats: 2})),
		"q6 stack K 40 F32":  second(Q6.Layout(F32, Matrix{Rows: 6, K: 40, Mats: 2})),
		"q5 K 20 row bytes":  second(Q5.RowBytes(F16, 20)),
		"q4 K 31 row bytes":  second(Q4.RowBytes(BF16, 31)),
		"nvfp4 K 1 encoder":  second(NewEncoder(NVFP4, F32, Matrix{Rows: 1, K: 1}, MinMax)),
		"q6 K 1 encoder":     second(NewEncoder(Q6, F32, Matrix{Rows: 1, K: 1}, Search)),
		"q5 K 33 enc tensor": third(EncodeTensor(Q5, BF16, Matrix{Rows: 1, K: 33}, Search, make([]byte, 66))),
	} {
		if !errors.Is(err, ErrDims) {
			t.Errorf("%s: %v, want ErrDims", name, err)
		}
	}
	for name, err := range map[string]error{
		"negative K":            second(Raw.RowBytes(BF16, -1)),
		"negative rows":         second(Q8.Layout(BF16, Matrix{Rows: -1, K: 4})),
		"rows not whole mats":   second(NVFP4.Layout(BF16, Matrix{Rows: 5, K: 16, Mats: 2})),
		"encoder whole mats":    second(NewEncoder(NVFP4, BF16, Matrix{Rows: 5, K: 16, Mats: 2}, MinMax)),
		"q8 size overflow":      second(Q8.EncodedSize(BF16, Matrix{Rows: 1 << 62, K: 64})),
		"raw row overflow":      second(Raw.RowBytes(F32, 1<<62)),
		"nvfp4 size overflow":   second(NVFP4.EncodedSize(BF16, Matrix{Rows: 1 << 58, K: 1 << 10})),
		"align overflow":        second(AlignUp(1<<63-1, 64)),
		"align negative":        second(AlignUp(-1, 64)),
		"flatten overflow":      second(FlattenShape([]int64{1 << 32, 1 << 32})),
		"flatten negative last": second(FlattenShape([]int64{3, -1})),
	} {
		if !errors.Is(err, ErrShape) {
			t.Errorf("%s: %v, want ErrShape", name, err)
		}
	}
	if _, err := Q8.RowBytes(DType(9), 4); !errors.Is(err, ErrUnknownDType) {
		t.Errorf("dtype 9: %v, want ErrUnknownDType", err)
	}
	if _, err := NewEncoder(Q4, DTypeInvalid, Matrix{Rows: 1, K: 32}, Search); !errors.Is(err, ErrUnknownDType) {
		t.Errorf("NewEncoder dtype 0: %v, want ErrUnknownDType", err)
	}
	if _, err := Format(9).RowBytes(BF16, 32); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("format 9 RowBytes: %v, want ErrUnknownFormat", err)
	}
	if err := DecodeRows(Format(9), BF16, Matrix{Rows: 1, K: 32}, nil, 0, 0, nil); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("format 9 DecodeRows: %v, want ErrUnknownFormat", err)
	}
	for _, tc := range []struct{ v, a, want int64 }{{0, 64, 0}, {1, 64, 64}, {64, 64, 64}, {65, 16384, 16384}, {16385, 16384, 32768}} {
		if got, err := AlignUp(tc.v, tc.a); err != nil || got != tc.want {
			t.Errorf("AlignUp(%d, %d) = %d, %v", tc.v, tc.a, got, err)
		}
	}
	for _, a := range []int64{0, -64, 48} {
		if _, err := AlignUp(5, a); err == nil {
			t.Errorf("AlignUp(5, %d) accepted", a)
		}
	}
}

func second[A any](_ A, err error) error        { return err }
func third[A, B any](_ A, _ B, err error) error { return err }

// layoutShapes are geometries valid for f (CheckDims), several of them
// nvfp4 stacks of more than one matrix.
func layoutShapes(f Format) [][]int64 {
	var out [][]int64
	for _, s := range [][]int64{{1, 32}, {3, 64}, {7, 96}, {1, 16}, {5, 48}, {4, 5}, {3, 5, 64}, {4, 1, 32}, {2, 7, 16}, {2, 3, 2, 32}, {6, 272}} {
		if f.CheckDims(s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// chunkings returns row boundaries 0 = b0 ≤ b1 ≤ … ≤ bn = rows: one chunk,
// every row alone, chunks that cross matrix boundaries, random chunks
// (empty ones included).
func chunkings(r *rand.Rand, rows, matRows int64) [][]int64 {
	fixed := func(first, size int64) []int64 {
		b := []int64{0}
		for at := min(first, rows); at < rows; at += size {
			b = append(b, at)
		}
		return append(b, rows)
	}
	out := [][]int64{{0, rows}, fixed(1, 1), fixed(1, matRows+1), fixed(matRows/2+1, max(matRows-1, 1)), {0, 0, rows, rows}}
	for range 6 {
		b := []int64{0}
		for at := int64(0); at < rows; {
			at = min(rows, at+r.Int64N(8))
			b = append(b, at)
		}
		out = append(out, append(b, rows))
	}
	return out
}

// TestSpanTiles: for any chunking, consecutive row ranges have consecutive
// spans from 0 to Size, each span holds exactly its rows and the headers of
// the matrices that start among them, and every matrix header lies in
// exactly one span.
func TestSpanTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range Formats() {
		for _, shape := range layoutShapes(f) {
			m := mustFlatten(t, shape)
			l, err := f.Layout(BF16, m)
			if err != nil {
				t.Fatal(err)
			}
			matBytes := l.HeaderBytes + l.MatRows*l.RowBytes
			for _, b := range chunkings(r, m.Rows, l.MatRows) {
				covered := make([]int, l.Size())
				var at int64
				for i := 0; i+1 < len(b); i++ {
					r0, n := b[i], b[i+1]-b[i]
					s, e := l.Span(r0, n)
					if s != at {
						t.Fatalf("%s %v chunks %v: span of rows %d+%d starts at %d, previous ended at %d", f, shape, b, r0, n, s, at)
					}
					var headers int64
					for row := r0; row < r0+n; row++ {
						if row%l.MatRows == 0 {
							headers++
						}
					}
					if e-s != n*l.RowBytes+headers*l.HeaderBytes {
						t.Fatalf("%s %v: span of rows %d+%d is %d bytes, want %d rows and %d headers", f, shape, r0, n, e-s, n, headers)
					}
					for o := s; o < e; o++ {
						covered[o]++
					}
					for row := r0; row < r0+n; row++ { // the row's bytes lie in its span
						if o := l.RowOffset(row); o < s || o+l.RowBytes > e {
							t.Fatalf("%s %v: row %d at %d outside its span [%d, %d)", f, shape, row, o, s, e)
						}
					}
					at = e
				}
				if at != l.Size() {
					t.Fatalf("%s %v chunks %v: spans end at %d, size %d", f, shape, b, at, l.Size())
				}
				for o, c := range covered {
					if c != 1 {
						t.Fatalf("%s %v: byte %d covered %d times", f, shape, o, c)
					}
				}
				for mat := range l.Matrices {
					if l.HeaderBytes > 0 && l.RowOffset(mat*l.MatRows) != mat*matBytes+l.HeaderBytes {
						t.Fatalf("%s %v: matrix %d rows start at %d, want %d", f, shape, mat, l.RowOffset(mat*l.MatRows), mat*matBytes+l.HeaderBytes)
					}
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Encoding

// encodeChunked encodes src chunk by chunk (boundaries b), scanning every
// matrix in pieces first when the encoder needs it; the chunks run
// concurrently when concurrent is set.
func encodeChunked(f Format, dt DType, m Matrix, method Method, src []byte, b []int64, concurrent bool) ([]byte, Stats, error) {
	e, err := NewEncoder(f, dt, m, method)
	if err != nil {
		return nil, Stats{}, err
	}
	l := e.Layout()
	rb := m.K * int64(dt.Size())
	if e.NeedsScan() {
		amax := make([]float32, l.Matrices)
		for i := 0; i+1 < len(b); i++ {
			for r := b[i]; r < b[i+1]; {
				mat := r / l.MatRows
				end := min(b[i+1], (mat+1)*l.MatRows)
				a, err := e.ScanRows(src[r*rb : end*rb])
				if err != nil {
					return nil, Stats{}, err
				}
				amax[mat] = max(amax[mat], a)
				r = end
			}
		}
		for mat, a := range amax {
			e.SetAmax(int64(mat), a)
		}
	}
	out := make([]byte, l.Size())
	var (
		mu    sync.Mutex
		st    Stats
		first error
		wg    sync.WaitGroup
	)
	for i := 0; i+1 < len(b); i++ {
		r0, n := b[i], b[i+1]-b[i]
		s, end := l.Span(r0, n)
		job := func() {
			got, err := e.EncodeRows(out[s:end], src[r0*rb:(r0+n)*rb], r0, n)
			mu.Lock()
			defer mu.Unlock()
			st.Merge(got)
			if err != nil && first == nil {
				first = err
			}
		}
		if concurrent {
			wg.Go(job)
		} else {
			job()
		}
	}
	wg.Wait()
	return out, st, first
}

// TestEncodeRowsChunked: encoding by arbitrary row chunks, serially and
// concurrently, chunks crossing nvfp4 matrix boundaries included, gives the
// bytes of EncodeTensor and the same statistics (up to summation order).
func TestEncodeRowsChunked(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, f := range Formats() {
		for _, method := range allMethods {
			for _, dt := range allDTypes {
				for _, shape := range layoutShapes(f) {
					m := mustFlatten(t, shape)
					src := randomSource(r, dt, int(m.Elements()))
					want, wst := mustEncode(t, f, dt, m, method, src)
					l, _ := f.Layout(dt, m)
					for ci, b := range chunkings(r, m.Rows, l.MatRows) {
						got, st, err := encodeChunked(f, dt, m, method, src, b, ci%2 == 1)
						if err != nil {
							t.Fatalf("%s %s %s %v chunks %v: %v", f, method, dt, shape, b, err)
						}
						if !bytes.Equal(got, want) {
							i := 0
							for got[i] == want[i] {
								i++
							}
							t.Fatalf("%s %s %s %v chunks %v: bytes differ from EncodeTensor first at %d of %d", f, method, dt, shape, b, i, len(want))
						}
						if !statsClose(st, wst) {
							t.Fatalf("%s %s %s %v chunks %v: stats %+v, EncodeTensor %+v", f, method, dt, shape, b, st, wst)
						}
					}
				}
			}
		}
	}
}

// TestRoundTrip encodes Gaussian and adversarial sources in every format,
// method and dtype and checks the result with checkRoundTrip (statistics,
// derived error bounds, raw identity, row decoding).
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	shapes := [][]int64{{1, 32}, {3, 64}, {17, 96}, {40, 512}, {2, 2816}, {3, 5, 64}, {4, 48}, {2, 272}, {3, 7}}
	for _, f := range Formats() {
		for _, method := range allMethods {
			for _, dt := range allDTypes {
				for i, shape := range shapes {
					if f.CheckDims(shape) != nil {
						continue
					}
					m := mustFlatten(t, shape)
					for _, kind := range []string{"gauss", "random"} {
						src := gaussSource(uint64(i), dt, int(m.Elements()))
						if kind == "random" {
							src = randomSource(r, dt, int(m.Elements()))
						}
						name := fmt.Sprintf("%s/%s/%s/%v/%s", f, method, dt, shape, kind)
						enc, st := mustEncode(t, f, dt, m, method, src)
						checkRoundTrip(t, name, f, method, dt, m, src, enc, st)
					}
				}
			}
		}
	}
}

// TestZeroAndConstant: constant sources decode close to the constant in
// every format (the bounds of checkRoundTrip, and never NaN).
func TestZeroAndConstant(t *testing.T) {
	m := Matrix{Rows: 4, K: 64}
	for _, f := range Formats() {
		for _, method := range allMethods {
			for _, c := range []float32{0, float32(math.Copysign(0, -1)), 0.5, -3, 1e-30, -7e-12, 1e30} {
				x := make([]float32, m.Elements())
				for i := range x {
					x[i] = c
				}
				src := fromFloat32(F32, x)
				enc, st := mustEncode(t, f, F32, m, method, src)
				checkRoundTrip(t, fmt.Sprintf("%s/%s/constant %g", f, method, c), f, method, F32, m, src, enc, st)
			}
		}
	}
}

// TestWideValues: float32 sources near the top of the range (whose group
// ranges stay finite) encode to finite values within the bounds.
func TestWideValues(t *testing.T) {
	m := Matrix{Rows: 2, K: 64}
	x := make([]float32, m.Elements())
	for i := range x {
		x[i] = float32(i%7) * 2.4e37 // group ranges up to 1.44e38 < MaxFloat32
	}
	x[5] = -1.5e38
	x[70] = math.MaxFloat32
	src := fromFloat32(F32, x)
	for _, f := range Formats() {
		for _, method := range allMethods {
			enc, st := mustEncode(t, f, F32, m, method, src)
			checkRoundTrip(t, fmt.Sprintf("%s/%s/wide", f, method), f, method, F32, m, src, enc, st)
		}
	}
}

// TestSearchFiniteWideRange: a q4/q5/q6 group whose float32 range max − min
// overflows (values of both signs near ±3e38) has no finite min/max delta.
// The engine's min/max encoder would store delta = +Inf there (the group
// would decode to NaN): MinMax refuses it with ErrRange instead of writing
// it. Search must decode such a group to finite values: a NaN has no squared
// error to minimize and finite candidates exist (delta ≤ MaxFloat32/nmax, or
// all zeros).
func TestSearchFiniteWideRange(t *testing.T) {
	m := Matrix{Rows: 1, K: 64}
	x := make([]float32, m.Elements())
	for i := range x {
		x[i] = float32(i%5-2) * 1.5e38 // ±3e38, ±1.5e38, 0
	}
	for _, dt := range []DType{BF16, F32} {
		src := fromFloat32(dt, x)
		for _, f := range []Format{Q4, Q5, Q6} {
			enc, st := mustEncode(t, f, dt, m, Search, src)
			checkRoundTrip(t, fmt.Sprintf("%s/%s/search wide range", f, dt), f, Search, dt, m, src, enc, st)
			if _, _, err := EncodeTensor(f, dt, m, MinMax, src); !errors.Is(err, ErrRange) {
				t.Errorf("%s/%s: MinMax on an overflowing range: %v, want ErrRange", f, dt, err)
			}
		}
	}
}

func TestNonFinite(t *testing.T) {
	m := Matrix{Rows: 4, K: 64}
	for _, f := range Formats() {
		for _, method := range allMethods {
			for _, dt := range allDTypes {
				for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
					x := make([]float32, m.Elements())
					for i := range x {
						x[i] = float32(i%9) * 0.01
					}
					x[2*64+37] = float32(bad)
					src := fromFloat32(dt, x)
					name := fmt.Sprintf("%s %s %s %g", f, method, dt, bad)
					e, err := NewEncoder(f, dt, m, method)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := e.ScanRows(src); !errors.Is(err, ErrNonFinite) {
						t.Errorf("%s ScanRows: %v, want ErrNonFinite", name, err)
					}
					if _, err := e.ScanRows(src[2*64*dt.Size() : 3*64*dt.Size()]); !errors.Is(err, ErrNonFinite) {
						t.Errorf("%s ScanRows of the bad row: %v, want ErrNonFinite", name, err)
					}
					e.SetAmax(0, 1)
					dst := make([]byte, e.Layout().Size())
					if _, err := e.EncodeRows(dst, src, 0, m.Rows); !errors.Is(err, ErrNonFinite) {
						t.Errorf("%s EncodeRows: %v, want ErrNonFinite", name, err)
					}
					s, end := e.Layout().Span(2, 1)
					if _, err := e.EncodeRows(dst[s:end], src[2*64*dt.Size():3*64*dt.Size()], 2, 1); !errors.Is(err, ErrNonFinite) {
						t.Errorf("%s EncodeRows of the bad row: %v, want ErrNonFinite", name, err)
					}
					s, end = e.Layout().Span(0, 2)
					if _, err := e.EncodeRows(dst[s:end], src[:2*64*dt.Size()], 0, 2); err != nil {
						t.Errorf("%s EncodeRows of good rows: %v", name, err)
					}
					if _, _, err := EncodeTensor(f, dt, m, method, src); !errors.Is(err, ErrNonFinite) {
						t.Errorf("%s EncodeTensor: %v, want ErrNonFinite", name, err)
					}
					if err := CheckFinite(dt, src); !errors.Is(err, ErrNonFinite) {
						t.Errorf("%s CheckFinite: %v, want ErrNonFinite", name, err)
					}
				}
			}
		}
	}
}

func TestBufferErrors(t *testing.T) {
	m := Matrix{Rows: 4, K: 64}
	for _, f := range Formats() {
		for _, method := range allMethods {
			e, err := NewEncoder(f, BF16, m, method)
			if err != nil {
				t.Fatal(err)
			}
			e.SetAmax(0, 1)
			src := gaussSource(1, BF16, int(m.Elements()))
			rows := src[:2*64*2] // rows 1 and 2
			s, end := e.Layout().Span(1, 2)
			good := make([]byte, end-s)
			if _, err := e.EncodeRows(good, rows, 1, 2); err != nil {
				t.Fatalf("%s %s: good call failed: %v", f, method, err)
			}
			enc, _ := mustEncode(t, f, BF16, m, method, src)
			s0, e0 := e.Layout().Span(0, 3)
			for name, call := range map[string]func() error{
				"short source":      func() error { _, err := e.EncodeRows(good, rows[1:], 1, 2); return err },
				"long source":       func() error { _, err := e.EncodeRows(good, slices.Concat(rows, []byte{0, 0}), 1, 2); return err },
				"short destination": func() error { _, err := e.EncodeRows(good[1:], rows, 1, 2); return err },
				"long destination":  func() error { _, err := e.EncodeRows(slices.Concat(good, []byte{0}), rows, 1, 2); return err },
				"span of rows 0..3": func() error { _, err := e.EncodeRows(make([]byte, e0-s0), rows, 1, 2); return err },
				"rows past end":     func() error { _, err := e.EncodeRows(good, rows, 3, 2); return err },
				"negative row":      func() error { _, err := e.EncodeRows(good, rows, -1, 2); return err },
				"negative count":    func() error { _, err := e.EncodeRows(nil, nil, 1, -1); return err },
				"decode short enc":  func() error { return DecodeRows(f, BF16, m, enc[1:], 0, 1, make([]float32, 64)) },
				"decode long enc":   func() error { return DecodeRows(f, BF16, m, slices.Concat(enc, []byte{0}), 0, 1, make([]float32, 64)) },
				"decode short dst":  func() error { return DecodeRows(f, BF16, m, enc, 0, 1, make([]float32, 63)) },
				"decode long dst":   func() error { return DecodeRows(f, BF16, m, enc, 0, 1, make([]float32, 65)) },
				"decode rows":       func() error { return DecodeRows(f, BF16, m, enc, 4, 1, make([]float32, 64)) },
				"decode negative":   func() error { return DecodeRows(f, BF16, m, enc, -1, 1, make([]float32, 64)) },
				"encode tensor":     func() error { return third(EncodeTensor(f, BF16, m, method, src[2:])) },
				"scan partial row":  func() error { _, err := e.ScanRows(src[:5]); return err },
				"scan odd bytes":    func() error { _, err := e.ScanRows(src[:129]); return err },
				"to float32":        func() error { return ToFloat32(BF16, src[:3], make([]float32, 2)) },
				"check finite":      func() error { return CheckFinite(F32, src[:6]) },
			} {
				if err := call(); !errors.Is(err, ErrBuffer) {
					t.Errorf("%s %s %s: %v, want ErrBuffer", f, method, name, err)
				}
			}
			// Rows 0 and 1 need the matrix header in front of them.
			_, err = e.EncodeRows(make([]byte, 2*e.Layout().RowBytes), src[:2*64*2], 0, 2)
			if f == NVFP4 && !errors.Is(err, ErrBuffer) || f != NVFP4 && err != nil {
				t.Errorf("%s %s rows 0..2 into two rows' bytes: %v", f, method, err)
			}
		}
	}
}

// TestNeedScan: the searching nvfp4 encoder refuses rows of a matrix whose
// amax was not set (ErrNeedScan), whatever the chunk; MinMax and the other
// formats need no scan.
func TestNeedScan(t *testing.T) {
	shape := []int64{3, 4, 32} // 3 matrices of 4 rows
	m := mustFlatten(t, shape)
	src := gaussSource(2, BF16, int(m.Elements()))
	rb := m.K * 2
	for _, f := range Formats() {
		for _, method := range allMethods {
			e, err := NewEncoder(f, BF16, m, method)
			if err != nil {
				t.Fatal(err)
			}
			if want := f == NVFP4 && method == Search; e.NeedsScan() != want {
				t.Errorf("%s %s NeedsScan = %v", f, method, e.NeedsScan())
			}
		}
	}
	encode := func(e *Encoder, r0, n int64) error {
		s, end := e.Layout().Span(r0, n)
		_, err := e.EncodeRows(make([]byte, end-s), src[r0*rb:(r0+n)*rb], r0, n)
		return err
	}
	e, _ := NewEncoder(NVFP4, BF16, m, Search)
	for _, c := range [][2]int64{{0, 12}, {0, 1}, {4, 4}, {8, 2}, {2, 3}, {1, 2}, {5, 1}, {9, 3}} {
		if err := encode(e, c[0], c[1]); !errors.Is(err, ErrNeedScan) {
			t.Errorf("nvfp4 search without SetAmax, rows %d+%d: %v, want ErrNeedScan", c[0], c[1], err)
		}
	}
	e.SetAmax(0, 1)
	e.SetAmax(2, 1)
	e.SetAmax(3, 1)  // no such matrix: ignored
	e.SetAmax(-1, 1) // ignored
	for _, c := range [][2]int64{{0, 4}, {8, 4}, {1, 2}, {9, 3}} {
		if err := encode(e, c[0], c[1]); err != nil {
			t.Errorf("rows %d+%d of scanned matrices: %v", c[0], c[1], err)
		}
	}
	for _, c := range [][2]int64{{0, 12}, {4, 1}, {2, 4}, {5, 2}, {7, 1}} {
		if err := encode(e, c[0], c[1]); !errors.Is(err, ErrNeedScan) {
			t.Errorf("rows %d+%d touching unscanned matrix 1: %v, want ErrNeedScan", c[0], c[1], err)
		}
	}
	e, _ = NewEncoder(NVFP4, BF16, m, MinMax)
	if err := encode(e, 0, 12); err != nil {
		t.Errorf("nvfp4 minmax: %v", err)
	}
}

// TestNVFP4MatrixScale: MinMax writes matrix scale 1.0 (the engine's);
// Search writes float32(amax)/2688 = amax/(6·448) for each matrix of a
// stack, from that matrix's own amax (1 when that is 0), and a SetAmax on
// MinMax changes nothing.
func TestNVFP4MatrixScale(t *testing.T) {
	mags := []float32{1e-3, 1, 300, 0, 0x1p-110, 1e-40}
	const n, k = 3, 48
	m := mustFlatten(t, []int64{int64(len(mags)), n, k})
	r := rand.New(rand.NewPCG(6, 6))
	x := make([]float32, m.Elements())
	for e, mag := range mags {
		for i := range n * k {
			x[e*n*k+i] = float32(r.NormFloat64()) * mag
		}
	}
	for _, dt := range []DType{BF16, F32} {
		src := fromFloat32(dt, x)
		xs := sourceFloats(t, dt, src)
		l, _ := NVFP4.Layout(dt, m)
		matBytes := l.HeaderBytes + l.MatRows*l.RowBytes
		for _, method := range allMethods {
			enc, st := mustEncode(t, NVFP4, dt, m, method, src)
			for e := range mags {
				var amax float32
				for _, v := range xs[e*n*k : (e+1)*n*k] {
					amax = max(amax, float32(absf(v)))
				}
				want := float32(1)
				if method == Search {
					if s := amax / (6 * 448); s > 0 {
						want = s
					}
				}
				got := math.Float32frombits(binary.LittleEndian.Uint32(enc[int64(e)*matBytes:]))
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%s %s expert %d (amax %g): matrix scale %g, want %g", dt, method, e, amax, got, want)
				}
			}
			checkRoundTrip(t, fmt.Sprintf("nvfp4/%s/%s/stack", method, dt), NVFP4, method, dt, m, src, enc, st)
		}
		// SetAmax is ignored by MinMax.
		e, _ := NewEncoder(NVFP4, dt, m, MinMax)
		e.SetAmax(0, 12345)
		out := make([]byte, l.Size())
		if _, err := e.EncodeRows(out, src, 0, m.Rows); err != nil {
			t.Fatal(err)
		}
		if g := math.Float32frombits(binary.LittleEndian.Uint32(out)); g != 1 {
			t.Errorf("minmax after SetAmax: matrix scale %g", g)
		}
	}
	// Non-finite or negative amax values count as 0: scale 1.
	for _, a := range []float32{float32(math.NaN()), float32(math.Inf(1)), -2, 0} {
		mm := Matrix{Rows: 1, K: 16}
		e, _ := NewEncoder(NVFP4, F32, mm, Search)
		e.SetAmax(0, a)
		out := make([]byte, e.Layout().Size())
		if _, err := e.EncodeRows(out, make([]byte, 64), 0, 1); err != nil {
			t.Fatal(err)
		}
		if g := math.Float32frombits(binary.LittleEndian.Uint32(out)); g != 1 {
			t.Errorf("SetAmax(%g): matrix scale %g, want 1", a, g)
		}
	}
}

func TestStatsRelRMSE(t *testing.T) {
	if (Stats{}).RelRMSE() != 0 {
		t.Error("empty stats")
	}
	if !math.IsInf(Stats{SumSqErr: 1}.RelRMSE(), 1) {
		t.Error("zero reference with error")
	}
	s := Stats{SumSqErr: 1, SumSqRef: 4, MaxAbsErr: 0.5, N: 2}
	s.Merge(Stats{SumSqErr: 3, SumSqRef: 12, MaxAbsErr: 0.25, N: 3})
	if s != (Stats{SumSqErr: 4, SumSqRef: 16, MaxAbsErr: 0.5, N: 5}) || s.RelRMSE() != 0.5 {
		t.Errorf("merge: %+v", s)
	}
}

// ---------------------------------------------------------------------------
// Hand-worked layouts: bytes built here from the format description
// (engine-facts.md, dgq-schema.md for q5), decoded by DecodeRows.

// packLSB writes codes of width bits as one LSB-first bit string: bit i of
// the string is bit i%8 of byte i/8, code j occupies bits [j·bits, j·bits+bits).
func packLSB(codes []uint8, bits int) []byte {
	out := make([]byte, len(codes)*bits/8)
	for j, c := range codes {
		for b := range bits {
			if c>>b&1 != 0 {
				i := j*bits + b
				out[i/8] |= 1 << (i % 8)
			}
		}
	}
	return out
}

func TestAffineHandLayout(t *testing.T) {
	for _, tc := range []struct {
		f      Format
		d, m   uint16 // bf16 delta and min
		df, mf float32
	}{
		{Q4, 0x3f80, 0xc100, 1, -8},      // 1.0, -8
		{Q5, 0x3f00, 0x4000, 0.5, 2},     // 0.5, 2
		{Q6, 0x3c00, 0xbf80, 0x1p-7, -1}, // 2^-7, -1
	} {
		bits := tc.f.Bits()
		var codes [32]uint8
		for j := range codes {
			codes[j] = uint8(j*7+3) & uint8(1<<bits-1)
		}
		blk := binary.LittleEndian.AppendUint16(nil, tc.d)
		blk = binary.LittleEndian.AppendUint16(blk, tc.m)
		blk = append(blk, packLSB(codes[:], bits)...)
		if tc.f == Q4 { // element 2j in the low nibble of byte j
			for j := range 16 {
				if blk[4+j] != codes[2*j]|codes[2*j+1]<<4 {
					t.Fatalf("q4 nibble order")
				}
			}
		}
		if tc.f == Q6 { // 8 little-endian 24-bit words of 4 codes
			for w := range 8 {
				word := uint32(codes[4*w]) | uint32(codes[4*w+1])<<6 | uint32(codes[4*w+2])<<12 | uint32(codes[4*w+3])<<18
				if got := uint32(blk[4+3*w]) | uint32(blk[5+3*w])<<8 | uint32(blk[6+3*w])<<16; got != word {
					t.Fatalf("q6 word %d: %#x, want %#x", w, got, word)
				}
			}
		}
		enc := append(append([]byte{}, blk...), blk...) // two groups: K = 64
		if int64(len(enc)) != tc.f.blockBytes()*2 {
			t.Fatalf("%s block is %d bytes", tc.f, len(enc)/2)
		}
		dec := decodeAll(t, tc.f, BF16, Matrix{Rows: 1, K: 64}, enc)
		for j, v := range dec {
			if want := float32(codes[j%32])*tc.df + tc.mf; v != want {
				t.Errorf("%s element %d: %g, want %g", tc.f, j, v, want)
			}
		}
		// packCodes/unpackCodes agree with the hand packing.
		got := make([]byte, 4*bits)
		packCodes(got, &codes, bits)
		var back [32]uint8
		unpackCodes(got, &back, bits)
		if !bytes.Equal(got, blk[4:]) || back != codes {
			t.Errorf("%s packCodes % x, want % x", tc.f, got, blk[4:])
		}
	}
}

func TestQ8HandLayout(t *testing.T) {
	const k = 256
	enc := binary.LittleEndian.AppendUint16(nil, 0x3c00) // 2^-7
	for j := range k {
		enc = append(enc, byte(j)) // every int8, −128 included
	}
	dec := decodeAll(t, Q8, BF16, Matrix{Rows: 1, K: k}, enc)
	for j, v := range dec {
		if want := float32(int8(byte(j))) * 0x1p-7; v != want {
			t.Errorf("element %d: %g, want %g", j, v, want)
		}
	}
}

func TestNVFP4HandLayout(t *testing.T) {
	// Two matrices of two rows of K = 32 (two blocks per row), matrix scales
	// 2 and 0.5; block scales 1.0 (0x38), 2.0 (0x40), 2^-9 (0x01), 448 (0x7e).
	e2m1 := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	scaleBytes := []byte{0x38, 0x40, 0x01, 0x7e}
	scaleVals := []float32{1, 2, 0x1p-9, 448}
	g := []float32{2, 0.5}
	var enc []byte
	var want []float32
	for mat := range 2 {
		enc = binary.LittleEndian.AppendUint32(enc, math.Float32bits(g[mat]))
		for r := range 2 {
			var codes [32]uint8
			for j := range codes {
				codes[j] = uint8(j*5+r*3+mat) & 15
			}
			for j := 0; j < 32; j += 2 {
				enc = append(enc, codes[j]|codes[j+1]<<4)
			}
			sb := [2]int{(r + mat) % 4, (r + mat + 2) % 4}
			enc = append(enc, scaleBytes[sb[0]], scaleBytes[sb[1]])
			for j, c := range codes {
				want = append(want, e2m1[c]*scaleVals[sb[j/16]]*g[mat])
			}
		}
	}
	m := mustFlatten(t, []int64{2, 2, 32})
	if n, _ := NVFP4.EncodedSize(BF16, m); n != int64(len(enc)) {
		t.Fatalf("hand encoding is %d bytes, EncodedSize %d", len(enc), n)
	}
	dec := decodeAll(t, NVFP4, BF16, m, enc)
	for j, v := range dec {
		if v != want[j] {
			t.Errorf("element %d: %g, want %g", j, v, want[j])
		}
	}
	// A hand-worked block: amax 6 with matrix scale 1 gives block scale
	// 1.0 (0x38), and these values are on the grid, for both methods.
	x := []float32{6, -6, 3, 0.5, 0, 1, -1.5, 2, 4, -4, 1.5, 0.5, -3, 2, -0.5, 6}
	wantCodes := []uint8{7, 0xf, 5, 1, 0, 2, 0xb, 4, 6, 0xe, 3, 1, 0xd, 4, 9, 7}
	for _, method := range allMethods {
		e, _ := NewEncoder(NVFP4, F32, Matrix{Rows: 1, K: 16}, method)
		e.SetAmax(0, 6*448) // scale 1
		out := make([]byte, e.Layout().Size())
		if _, err := e.EncodeRows(out, fromFloat32(F32, x), 0, 1); err != nil {
			t.Fatal(err)
		}
		if g := math.Float32frombits(binary.LittleEndian.Uint32(out)); g != 1 {
			t.Errorf("%s: matrix scale %g", method, g)
		}
		if out[4+8] != 0x38 {
			t.Errorf("%s: block scale %#02x, want 0x38", method, out[12])
		}
		for j := 0; j < 16; j += 2 {
			if w := wantCodes[j] | wantCodes[j+1]<<4; out[4+j/2] != w {
				t.Errorf("%s: code byte %d = %#02x, want %#02x", method, j/2, out[4+j/2], w)
			}
		}
	}
}
