package codecs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withoutFast runs fn with the SIMD paths (nvfp4 encoder, scan) disabled:
// the scalar reference.
func withoutFast(fn func()) {
	nv, sc := nvfp4Fast, scanFast
	nvfp4Fast, scanFast = nil, nil
	defer func() { nvfp4Fast, scanFast = nv, sc }()
	fn()
}

// encodeNVFP4Search encodes with the searching nvfp4 encoder; amax[i] is
// matrix i's SetAmax value (nil: scan every matrix).
func encodeNVFP4Search(t testing.TB, dt DType, m Matrix, src []byte, amax []float32) ([]byte, Stats) {
	t.Helper()
	e, err := NewEncoder(NVFP4, dt, m, Search)
	if err != nil {
		t.Fatal(err)
	}
	l := e.Layout()
	per := int64(len(src)) / l.Matrices
	for mat := range l.Matrices {
		if amax != nil {
			e.SetAmax(mat, amax[mat])
			continue
		}
		a, err := e.ScanRows(src[mat*per : (mat+1)*per])
		if err != nil {
			t.Fatal(err)
		}
		e.SetAmax(mat, a)
	}
	out := make([]byte, l.Size())
	st, err := e.EncodeRows(out, src, 0, m.Rows)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// checkFastMatches encodes with and without the SIMD paths and requires
// identical bytes and bit-identical statistics.
func checkFastMatches(t testing.TB, name string, dt DType, m Matrix, src []byte, amax []float32) {
	t.Helper()
	got, gst := encodeNVFP4Search(t, dt, m, src, amax)
	var want []byte
	var wst Stats
	withoutFast(func() { want, wst = encodeNVFP4Search(t, dt, m, src, amax) })
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Errorf("%s %s %+v: SIMD encoding differs from the reference first at byte %d of %d (%#02x, want %#02x)", name, dt, m, i, len(want), got[i], want[i])
	}
	if !sameStats(gst, wst) {
		t.Errorf("%s %s %+v: SIMD stats %+v, reference %+v", name, dt, m, gst, wst)
	}
}

// nvfp4Adversarial makes n values that hit the E2M1 thresholds, E4M3
// rounding ties and subnormal block scales for a matrix scale scale2.
func nvfp4Adversarial(r *rand.Rand, n int, scale2 float32) []float32 {
	x := make([]float32, n)
	mids := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 0.5, 1, 1.5, 2, 3, 4, 6, 7}
	for b := 0; b < n; b += 16 {
		kind := r.IntN(10)
		s8 := E4M3ToFloat32(uint8(r.IntN(0x7f))) // any finite E4M3 value
		den := s8 * scale2
		for j := b; j < min(b+16, n); j++ {
			var v float32
			switch kind {
			case 0, 1, 2: // E2M1 ties and their neighbours
				v = mids[r.IntN(len(mids))] * den
				switch r.IntN(3) {
				case 1:
					v = math.Nextafter32(v, 0)
				case 2:
					v = math.Nextafter32(v, float32(math.Inf(1)))
				}
				if r.IntN(2) == 0 {
					v = -v
				}
			case 3: // zero block
				v = 0
			case 4: // tiny next to the matrix amax
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

// TestNVFP4FastMatchesReference: the AVX-512 nvfp4 row encoder is
// bit-identical to the reference (codes, scales, statistics) on random and
// adversarial rows of many magnitudes (tiny matrices with amax < 2^-100
// included, which the kernel hands back to the reference), K not a multiple
// of 256, expert stacks, and matrix scales from mismatched SetAmax values.
func TestNVFP4FastMatchesReference(t *testing.T) {
	if nvfp4Fast == nil {
		t.Skip("no SIMD nvfp4 path in this build or on this CPU")
	}
	// Count the calls where the kernel handed blocks back to the reference
	// (an inverse block scale overflows: matrix amax below about 2^-100).
	fast := nvfp4Fast
	defer func() { nvfp4Fast = fast }()
	var handedBack int
	nvfp4Fast = func(g float32, codes, scales []byte, x []float32, st *Stats) int {
		n := fast(g, codes, scales, x, st)
		if n < len(x)/256*16 {
			handedBack++
		}
		return n
	}
	r := rand.New(rand.NewPCG(11, 3))
	shapes := [][]int64{{1, 16}, {1, 256}, {3, 272}, {2, 512}, {5, 2816}, {2, 4096 + 48}, {33, 96}, {3, 2, 528}, {2, 3, 256}}
	mags := []float64{1, 0.02, 1e-30, 0x1p-101, 0x1p-105, 0x1p-112, 0x1p-125, 1e30, 3e37}
	for _, dt := range allDTypes {
		for _, shape := range shapes {
			m := mustFlatten(t, shape)
			n := int(m.Elements())
			for _, mag := range mags {
				// Gaussian blocks of magnitudes mag·2^-s, s = 0…11: block
				// scales far below the matrix's, as real weights have.
				x := make([]float32, n)
				for b := 0; b < n; b += 16 {
					bm := math.Ldexp(mag, -r.IntN(12))
					for i := b; i < b+16; i++ {
						x[i] = float32(r.NormFloat64() * bm)
					}
				}
				src := fromFloat32(dt, x)
				if CheckFinite(dt, src) != nil {
					continue
				}
				name := fmt.Sprintf("gauss %g", mag)
				checkFastMatches(t, name, dt, m, src, nil)
				mats := m.Matrices()
				for _, scale := range []float32{4, 1.0 / 3, 0, 1e-38, 3e38} {
					amax := make([]float32, mats)
					for i := range amax {
						amax[i] = float32(mag) * 4 * scale
					}
					checkFastMatches(t, fmt.Sprintf("%s amax×%g", name, scale), dt, m, src, amax)
				}
			}
			// Assorted groups (constant, zeros, tiny, huge, outliers, grids).
			checkFastMatches(t, "random", dt, m, randomSource(r, dt, n), nil)
			// Adversarial blocks for several matrix scales.
			for _, s2 := range []float32{1, 0.02 / 2688, 1e-30, 0x1p-112, 0x1p-140, 1e30} {
				src := fromFloat32(dt, nvfp4Adversarial(r, n, s2))
				if CheckFinite(dt, src) != nil {
					continue
				}
				checkFastMatches(t, fmt.Sprintf("adversarial %g", s2), dt, m, src, nil)
				amax := make([]float32, m.Matrices())
				for i := range amax {
					amax[i] = s2 * 2688
				}
				checkFastMatches(t, fmt.Sprintf("adversarial %g at its scale", s2), dt, m, src, amax)
			}
		}
	}
	if handedBack == 0 {
		t.Error("no row took the kernel's hand-back path: the tiny-matrix cases do not test it")
	}
	t.Logf("%d rows handed blocks back to the reference", handedBack)
}

// TestNVFP4FastLarge: matrices large enough for the statistics' running
// sums to cross many binades, with short significands (many exact halfway
// terms, which the kernel's summation treats specially).
func TestNVFP4FastLarge(t *testing.T) {
	if nvfp4Fast == nil {
		t.Skip("no SIMD nvfp4 path in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(21, 4))
	m := Matrix{Rows: 48, K: 4096}
	if testing.Short() {
		m.Rows = 12
	}
	gens := map[string]func(i int) float64{
		"gauss": func(int) float64 { return r.NormFloat64() * 0.02 },
		"grid":  func(int) float64 { return float64(r.IntN(64)-32) / 1024 },
		"pow2":  func(int) float64 { return math.Ldexp(float64(r.IntN(3)-1), -r.IntN(30)) },
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
			checkFastMatches(t, name, dt, m, fromFloat32(dt, x), nil)
		}
	}
}

// TestScanMatchesReference compares the SIMD scan (absMax, firstNonFinite)
// with the scalar code and a naive max: NaN and ±Inf at assorted
// positions, signed zeros, subnormals, the largest finite values.
func TestScanMatchesReference(t *testing.T) {
	if scanFast == nil {
		t.Skip("no SIMD scan in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 9))
	largest := map[DType]float32{BF16: 3.38e38, F16: 65504, F32: math.MaxFloat32}
	for _, dt := range allDTypes {
		for _, n := range []int{0, 1, 15, 16, 127, 128, 129, 255, 256, 1000, 4099} {
			x := make([]float32, n)
			for i := range x {
				switch r.IntN(6) {
				case 0:
					x[i] = float32(math.Copysign(0, float64(r.IntN(2)-1)))
				case 1:
					x[i] = float32(r.NormFloat64()) * 1e-40
				case 2:
					x[i] = float32(r.NormFloat64()) * 3e38
				default:
					x[i] = float32(r.NormFloat64())
				}
			}
			src := fromFloat32(dt, x)
			for i := range n { // what overflowed the dtype: its largest finite value
				bad := false
				switch dt {
				case BF16, F16:
					bad = uint32(binary.LittleEndian.Uint16(src[2*i:]))&infBits(dt) == infBits(dt)
				case F32:
					bad = binary.LittleEndian.Uint32(src[4*i:])&infBits(dt) == infBits(dt)
				}
				if bad {
					copy(src[i*dt.Size():], fromFloat32(dt, []float32{float32(math.Copysign(float64(largest[dt]), float64(x[i])))}))
				}
			}
			var wantMax float32
			var wantBad int
			withoutFast(func() { wantMax, wantBad = absMax(dt, src), firstNonFinite(dt, src) })
			var naive float32
			for _, v := range sourceFloats(t, dt, src) {
				naive = max(naive, float32(absf(v)))
			}
			if math.Float32bits(naive) != math.Float32bits(wantMax) || wantBad != -1 {
				t.Fatalf("%s n=%d: scalar absMax %g (naive %g), firstNonFinite %d", dt, n, wantMax, naive, wantBad)
			}
			if got := absMax(dt, src); math.Float32bits(got) != math.Float32bits(wantMax) {
				t.Errorf("%s n=%d: absMax %g, want %g", dt, n, got, wantMax)
			}
			if got := firstNonFinite(dt, src); got != -1 {
				t.Errorf("%s n=%d: firstNonFinite %d on a finite source", dt, n, got)
			}
			for range 5 {
				if n == 0 {
					break
				}
				bad := bytes.Clone(src)
				pos := r.IntN(n)
				for k := range 1 + r.IntN(3) {
					i := min(n-1, pos+k*r.IntN(40))
					v := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[r.IntN(3)]
					copy(bad[i*dt.Size():], fromFloat32(dt, []float32{float32(v)}))
				}
				withoutFast(func() { wantBad = firstNonFinite(dt, bad) })
				if got := firstNonFinite(dt, bad); got != wantBad || got != pos {
					t.Errorf("%s n=%d: firstNonFinite %d, reference %d, first at %d", dt, n, got, wantBad, pos)
				}
			}
		}
	}
}

// FuzzNVFP4FastMatchesReference: for any finite source and any matrix amax
// the SIMD nvfp4 encoder equals the reference bit for bit.
func FuzzNVFP4FastMatchesReference(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(9), []byte{0x80, 0x3f, 0, 0x40, 0x12, 0xb9}, float32(0))
	f.Add(uint8(2), uint8(1), uint8(40), []byte{0xff, 0x7f, 0x7f, 0x00, 0x01, 0x80, 0x33}, float32(1e-30))
	f.Add(uint8(1), uint8(7), uint8(17), []byte{0x00, 0x3c, 0x00, 0xbc, 0x01, 0x00}, float32(2.5))
	f.Add(uint8(0), uint8(2), uint8(16), []byte{0x01, 0x00, 0x02, 0x80, 0x03, 0x00}, float32(-1))
	f.Fuzz(func(t *testing.T, db, rb, kb uint8, data []byte, amax float32) {
		if nvfp4Fast == nil {
			t.Skip("no SIMD nvfp4 path")
		}
		dt := allDTypes[int(db)%len(allDTypes)]
		m := Matrix{Rows: int64(rb%8) + 1, K: int64(kb%64+1) * 16}
		src := fill(int(m.Elements())*dt.Size(), data)
		if CheckFinite(dt, src) != nil {
			return
		}
		if !(amax >= 0) || amax > math.MaxFloat32 {
			checkFastMatches(t, "fuzz scanned", dt, m, src, nil)
			return
		}
		checkFastMatches(t, "fuzz", dt, m, src, []float32{amax})
	})
}
