package codecs

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// withoutFast runs fn with the nvfp4/q8/scan SIMD paths disabled.
func withoutFast(fn func()) {
	nv, q, sc := nvfp4Fast, q8Fast, scanFast
	nvfp4Fast, q8Fast, scanFast = nil, nil, nil
	defer func() { nvfp4Fast, q8Fast, scanFast = nv, q, sc }()
	fn()
}

// encodeWith encodes rows [0, m.Rows) with amax as the tensor amax (nvfp4)
// and returns the whole encoded tensor and the statistics.
func encodeWith(t *testing.T, f Format, dt DType, m Matrix, src []byte, amax float32) ([]byte, Stats) {
	t.Helper()
	e, err := NewEncoder(f, dt, m)
	if err != nil {
		t.Fatal(err)
	}
	e.SetAmax(amax)
	size, _ := f.EncodedSize(dt, m)
	buf := make([]byte, size)
	dst := make([][]byte, len(e.planes))
	for i, p := range e.planes {
		dst[i] = buf[p.Offset : p.Offset+p.Size]
		copy(dst[i], e.TensorPlane(i))
	}
	st, err := e.EncodeRows(dst, src, 0, m.Rows)
	if err != nil {
		t.Fatal(err)
	}
	return buf, st
}

// oracleEncode encodes with the frozen reference of oracle_test.go.
func oracleEncode(f Format, dt DType, m Matrix, src []byte, amax float32) ([]byte, Stats) {
	planes, _ := f.Planes(dt, m)
	size, _ := f.EncodedSize(dt, m)
	buf := make([]byte, size)
	pl := func(i int) []byte { return buf[planes[i].Offset : planes[i].Offset+planes[i].Size] }
	switch f {
	case NVFP4:
		e := &Encoder{}
		e.SetAmax(amax)
		copy(pl(2), (&Encoder{f: NVFP4, planes: planes, scale2: e.scale2}).TensorPlane(2))
		return buf, encodeNVFP4Orig(dt, e.scale2, m.K, pl(0), pl(1), src, m.Rows)
	case Q8:
		return buf, encodeQ8Orig(dt, m.K, pl(0), pl(1), src, m.Rows)
	}
	panic(f)
}

func sameStats(a, b Stats) bool {
	return math.Float64bits(a.SumSqErr) == math.Float64bits(b.SumSqErr) &&
		math.Float64bits(a.SumSqRef) == math.Float64bits(b.SumSqRef) &&
		math.Float64bits(a.MaxAbsErr) == math.Float64bits(b.MaxAbsErr) && a.N == b.N
}

// checkAgainstOracle encodes src with the production encoder, with and
// without the SIMD paths, and compares both with the oracle.
func checkAgainstOracle(t *testing.T, name string, f Format, dt DType, m Matrix, src []byte, amax float32) {
	t.Helper()
	want, wst := oracleEncode(f, dt, m, src, amax)
	got, gst := encodeWith(t, f, dt, m, src, amax)
	var ref []byte
	var rst Stats
	withoutFast(func() { ref, rst = encodeWith(t, f, dt, m, src, amax) })
	for _, c := range []struct {
		what string
		b    []byte
		st   Stats
	}{{"fast", got, gst}, {"reference", ref, rst}} {
		if !bytes.Equal(c.b, want) {
			i := 0
			for c.b[i] == want[i] {
				i++
			}
			t.Errorf("%s %s %s %v (%s): encodings differ first at byte %d of %d (got %#x want %#x)", c.what, f, dt, m, name, i, len(want), c.b[i], want[i])
		}
		if !sameStats(c.st, wst) {
			t.Errorf("%s %s %s %v (%s): stats %+v, want %+v", c.what, f, dt, m, name, c.st, wst)
		}
	}
}

// nvfp4Adversarial makes n values that hit the E2M1 thresholds, E4M3
// rounding ties and subnormal block scales for a tensor scale scale2.
func nvfp4Adversarial(r *rand.Rand, n int, scale2 float32) []float32 {
	x := make([]float32, n)
	for b := 0; b < n; b += 16 {
		kind := r.IntN(10)
		// A block scale s8 (any E4M3 value) and values on its E2M1 grid,
		// its midpoints (ties) and next to them.
		s8 := E4M3ToFloat32(uint8(r.IntN(0x7f)))
		den := s8 * scale2
		for j := b; j < min(b+16, n); j++ {
			var v float32
			switch kind {
			case 0, 1, 2: // ties and neighbours of ties
				mids := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 0.5, 1, 1.5, 2, 3, 4, 6, 7}
				v = mids[r.IntN(len(mids))] * den
				switch r.IntN(3) {
				case 1:
					v = math.Nextafter32(v, 0)
				case 2:
					v = math.Nextafter32(v, float32(math.Inf(1)))
				}
			case 3: // zero block
				v = 0
			case 4: // tiny block next to the tensor amax
				v = float32(r.NormFloat64()) * scale2 * 1e-3
			case 5: // block amax on an E4M3 rounding tie
				v = float32(r.NormFloat64()) * den
				if j == b {
					c := uint8(r.IntN(0x7e))
					v = 6 * scale2 * (E4M3ToFloat32(c) + E4M3ToFloat32(c+1)) / 2
				}
			case 6: // mixed signs on a grid
				v = float32(r.IntN(25)-12) * 0.25 * den
			default:
				v = float32(r.NormFloat64()) * den * 3
			}
			x[j] = v
		}
	}
	return x
}

func TestNVFP4Q8MatchOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	shapes := []Matrix{{1, 16}, {1, 256}, {3, 272}, {16, 64}, {5, 2816}, {33, 96}, {2, 4096}}
	for _, dt := range allDTypes {
		for _, m := range shapes {
			// randomSource: assorted groups (constant, zeros, tiny, huge,
			// outliers, grids).
			src := randomSource(r, dt, int(m.Elements()))
			e, _ := NewEncoder(NVFP4, dt, m)
			amax, err := e.ScanRows(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []float32{amax, amax * 4, amax / 3, 0, 1e-38, 3e38} {
				checkAgainstOracle(t, "random", NVFP4, dt, m, src, a)
			}
			checkAgainstOracle(t, "random", Q8, dt, m, src, 0)
			// Adversarial nvfp4 blocks for several tensor scales.
			for _, s2 := range []float32{1, 0.02 / 2688, 1e-30, 0x1p-140, 1e30} {
				x := nvfp4Adversarial(r, int(m.Elements()), s2)
				src := fromFloat32(dt, x)
				if CheckFinite(dt, src) != nil {
					continue
				}
				a, err := e.ScanRows(src)
				if err != nil {
					t.Fatal(err)
				}
				checkAgainstOracle(t, "adversarial", NVFP4, dt, m, src, a)
				checkAgainstOracle(t, "adversarial", NVFP4, dt, m, src, s2*2688)
				checkAgainstOracle(t, "adversarial", Q8, dt, m, src, 0)
			}
		}
	}
}

// TestQ8MatchOracleRows covers q8 rows of every length mod 16, with rows
// whose refit sums are not provably exact, and extreme magnitudes.
func TestQ8MatchOracleRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for _, dt := range allDTypes {
		for k := int64(1); k <= 70; k++ {
			m := Matrix{3, k}
			x := make([]float32, m.Elements())
			for i := range x {
				x[i] = float32(r.NormFloat64() * 0.02)
				switch r.IntN(20) {
				case 0:
					x[i] *= 1e-20 // spread of exponents: inexact refit sums
				case 1:
					x[i] = 0
				case 2:
					x[i] *= 1000
				}
			}
			checkAgainstOracle(t, "mixed", Q8, dt, m, fromFloat32(dt, x), 0)
		}
		// Long rows with a lone outlier: clipping it (a scale below
		// amax/127) wins, so the fine step has two candidates.
		for _, k := range []int64{40000, 65536} {
			m := Matrix{2, k}
			x := make([]float32, m.Elements())
			for i := range x {
				x[i] = float32(r.NormFloat64() * 0.01)
			}
			x[5], x[k+7], x[k+8] = 0.07, -0.05, 0.05
			checkAgainstOracle(t, "outlier", Q8, dt, m, fromFloat32(dt, x), 0)
		}
		for _, sc := range []float64{1e-38, 1e-30, 1e-6, 1, 1e4, 3e37} {
			m := Matrix{4, 300}
			x := make([]float32, m.Elements())
			for i := range x {
				v := r.NormFloat64() * sc
				if dt != F32 && r.IntN(3) == 0 {
					v = float64(r.IntN(255)-127) * sc / 64 // on a grid: code ties
				}
				if dt == F16 {
					v = max(min(v, 65504), -65504)
				}
				x[i] = float32(v)
			}
			checkAgainstOracle(t, "scaled", Q8, dt, m, fromFloat32(dt, x), 0)
		}
	}
}

// TestFastStatsLarge encodes matrices large enough for the running sums of
// the statistics to cross many binades, with data that makes many of the
// terms err² and src² exact halfway cases of the sums' rounding (short
// significands), and compares everything with the oracle bit for bit.
func TestFastStatsLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 4))
	m := Matrix{48, 4096}
	if testing.Short() {
		m.Rows = 12
	}
	gens := map[string]func(i int) float64{
		"gauss": func(int) float64 { return r.NormFloat64() * 0.02 },
		"t3": func(int) float64 {
			var chi float64
			for range 3 {
				g := r.NormFloat64()
				chi += g * g
			}
			return r.NormFloat64() / math.Sqrt(chi/3) * 0.012
		},
		"grid": func(int) float64 { return float64(r.IntN(64)-32) / 1024 }, // short significands: many ties
		"pow2": func(int) float64 { return math.Ldexp(float64(r.IntN(3)-1), -r.IntN(30)) },
		"mixed": func(i int) float64 {
			switch r.IntN(8) {
			case 0:
				return r.NormFloat64() * 1e-12
			case 1:
				return 0
			case 2:
				return float64(r.IntN(16)) * 0x1p-20
			}
			return r.NormFloat64() * math.Ldexp(1, (i/4096)%9-6)
		},
	}
	for name, gen := range gens {
		x := make([]float32, m.Elements())
		for i := range x {
			x[i] = float32(gen(i))
		}
		for _, dt := range allDTypes {
			src := fromFloat32(dt, x)
			if CheckFinite(dt, src) != nil {
				t.Fatal(name)
			}
			e, _ := NewEncoder(NVFP4, dt, m)
			a, _ := e.ScanRows(src)
			checkAgainstOracle(t, name, NVFP4, dt, m, src, a)
			checkAgainstOracle(t, name, Q8, dt, m, src, 0)
		}
	}
}

// TestScanMatchesReference compares the SIMD scan (absMax, firstNonFinite)
// with the scalar code: NaN and ±Inf at every kind of position, signed
// zeros, subnormals, the largest finite values.
func TestScanMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for _, dt := range allDTypes {
		for _, n := range []int{0, 1, 15, 16, 127, 128, 129, 255, 256, 1000, 4099} {
			x := make([]float32, n)
			for i := range x {
				switch r.IntN(6) {
				case 0:
					x[i] = float32(math.Copysign(0, float64(r.IntN(2)-1)))
				case 1:
					x[i] = float32(r.NormFloat64()) * 1e-40 // subnormal in float32 and bf16
				case 2:
					x[i] = float32(r.NormFloat64()) * 3e38
				default:
					x[i] = float32(r.NormFloat64())
				}
			}
			src := fromFloat32(dt, x)
			// Clamp what did not fit the dtype to its largest finite value.
			for i := range n {
				bad := false
				switch dt {
				case BF16, F16:
					bad = binary.LittleEndian.Uint16(src[2*i:])&uint16(infBits(dt)) == uint16(infBits(dt))
				case F32:
					bad = binary.LittleEndian.Uint32(src[4*i:])&infBits(dt) == infBits(dt)
				}
				if bad {
					copy(src[i*dt.Size():], fromFloat32(dt, []float32{map[DType]float32{BF16: 3.38e38, F16: 65504, F32: math.MaxFloat32}[dt]}))
				}
			}
			var wantMax float32
			var wantBad int
			withoutFast(func() { wantMax, wantBad = absMax(dt, src), firstNonFinite(dt, src) })
			naive := make([]float32, n)
			toFloat32(dt, src, naive)
			var naiveMax float32
			for _, v := range naive {
				naiveMax = max(naiveMax, float32(math.Abs(float64(v))))
			}
			if math.Float32bits(naiveMax) != math.Float32bits(wantMax) {
				t.Errorf("%s n=%d: scalar absMax %g, want %g", dt, n, wantMax, naiveMax)
			}
			if got := absMax(dt, src); math.Float32bits(got) != math.Float32bits(wantMax) {
				t.Errorf("%s n=%d: absMax %g, want %g", dt, n, got, wantMax)
			}
			if got := firstNonFinite(dt, src); got != wantBad || got != -1 {
				t.Errorf("%s n=%d: firstNonFinite %d, want %d", dt, n, got, wantBad)
			}
			for range 5 {
				if n == 0 {
					break
				}
				bad := append([]byte(nil), src...)
				pos := r.IntN(n)
				for k := range 1 + r.IntN(3) {
					i := min(n-1, pos+k*r.IntN(40))
					v := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[r.IntN(3)]
					copy(bad[i*dt.Size():], fromFloat32(dt, []float32{float32(v)}))
				}
				withoutFast(func() { wantBad = firstNonFinite(dt, bad) })
				if got := firstNonFinite(dt, bad); got != wantBad || got != pos {
					t.Errorf("%s n=%d: firstNonFinite %d, want %d (first at %d)", dt, n, got, wantBad, pos)
				}
			}
		}
	}
}

// FuzzFastMatchesOracle: nvfp4 and q8 encodings (SIMD paths where present)
// equal the frozen reference, statistics included, for any finite source
// and any tensor amax.
func FuzzFastMatchesOracle(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(9), []byte{0x80, 0x3f, 0, 0x40, 0x12, 0xb9}, float32(0))
	f.Add(uint8(2), uint8(1), uint8(40), []byte{0xff, 0x7f, 0x7f, 0x00, 0x01, 0x80, 0x33}, float32(1e-30))
	f.Add(uint8(1), uint8(7), uint8(17), []byte{0x00, 0x3c, 0x00, 0xbc, 0x01, 0x00}, float32(2.5))
	f.Fuzz(func(t *testing.T, db, rb, kb uint8, data []byte, amax float32) {
		dt := allDTypes[int(db)%len(allDTypes)]
		m := Matrix{Rows: int64(rb%8) + 1, K: int64(kb%64+1) * 16}
		src := make([]byte, m.Elements()*int64(dt.Size()))
		for i := 0; len(data) > 0 && i < len(src); i += len(data) {
			copy(src[i:], data)
			// Vary the copies a little, so that blocks differ.
			src[i] ^= byte(i / len(data))
		}
		if CheckFinite(dt, src) != nil {
			return
		}
		if !(amax >= 0) || amax > math.MaxFloat32 {
			e, _ := NewEncoder(NVFP4, dt, m)
			amax, _ = e.ScanRows(src)
		}
		checkAgainstOracle(t, "fuzz", NVFP4, dt, m, src, amax)
		checkAgainstOracle(t, "fuzz", Q8, dt, m, src, 0)
	})
}
