package codecs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

// Tests of the importance-weighted q8 and nvfp4 searches (search_w.go).

// lognormalWeights returns n weights exp(σ·N(0,1)) as float32.
func lognormalWeights(r *rand.Rand, n int, sigma float64) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(math.Exp(sigma * r.NormFloat64()))
	}
	return w
}

func to64(w []float32) []float64 {
	v := make([]float64, len(w))
	for i, u := range w {
		v[i] = float64(u)
	}
	return v
}

func ones(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// withoutFastW runs fn with every SIMD path off (the scalar references).
func withoutFastW(fn func()) {
	w := nvfp4FastW
	nvfp4FastW = nil
	defer func() { nvfp4FastW = w }()
	withoutFast(fn)
}

// statsOfW recomputes Stats as the weighted encoders account them: the
// plain terms summed per group of pg elements and the weighted ones per
// group of wg (terms in element order from 0, group sums in order; a group
// of 1 is the plain element-by-element sum), w(i) the weight of element i.
func statsOfW(dec, x []float32, w func(i int) float64, pg, wg int) Stats {
	var s Stats
	var se, sr, swe, swr float64
	for i, v := range x {
		e := float64(dec[i]) - float64(v)
		r := float64(v)
		se += float64(e * e)
		sr += float64(r * r)
		swe += float64(w(i) * float64(e*e))
		swr += float64(w(i) * float64(r*r))
		if (i+1)%pg == 0 {
			s.SumSqErr += se
			s.SumSqRef += sr
			se, sr = 0, 0
		}
		if (i+1)%wg == 0 {
			s.SumWSqErr += swe
			s.SumWSqRef += swr
			swe, swr = 0, 0
		}
		if a := math.Abs(e); a > s.MaxAbsErr {
			s.MaxAbsErr = a
		}
		s.N++
	}
	return s
}

// sameStatsW is bit-for-bit equality including the weighted terms.
func sameStatsW(a, b Stats) bool {
	return sameStats(a, b) && math.Float64bits(a.SumWSqErr) == math.Float64bits(b.SumWSqErr) &&
		math.Float64bits(a.SumWSqRef) == math.Float64bits(b.SumWSqRef)
}

// weightedErr is Σ w·err² of dec against x in float64, element order.
func weightedErr(dec, x []float32, w []float64) float64 {
	var s float64
	for i, v := range x {
		e := float64(dec[i]) - float64(v)
		s += float64(w[i] * float64(e*e))
	}
	return s
}

// q8TestRows are the q8 test rows: random and adversarial rows (randRows)
// of several lengths and rows of both benchmark matrices.
func q8TestRows(t testing.TB, n int) [][]float32 {
	var rows [][]float32
	for _, k := range []int{1, 7, 32, 100, 704, 2816} {
		rows = append(rows, randRows(n*32/k+3, k, uint64(k)+40)...)
	}
	for _, d := range testmat.Dists {
		x := benchValues(t, d, 16)
		for r := 0; r < 16; r++ {
			rows = append(rows, x[r*2816:(r+1)*2816])
		}
	}
	return rows
}

// TestQ8WeightedUniform: with all weights 1 (and with any other uniform
// weight) the weighted q8 search writes the unweighted searching encoder's
// bytes and plain statistics, and at weight 1 the weighted sums equal the
// plain ones. The weighted evaluation itself (without the shortcut for
// uniform rows) also reproduces the unweighted search at weight 1.
func TestQ8WeightedUniform(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 40
	}
	for i, x := range q8TestRows(t, n) {
		k := len(x)
		want := make([]byte, q8ScaleBytes+k)
		var wst Stats
		encodeQ8Row(Search, want, x, new(scratch), &wst)
		sc := new(sq8Scratch)
		u := newSq8Row(x, nil, sc)
		u.search()
		us, uq := u.s[u.best], slices.Clone(u.q[u.best])
		wr := newSq8Row(x, ones(k), sc)
		wr.search()
		if wr.s[wr.best] != us || !slices.Equal(wr.q[wr.best], uq) {
			t.Fatalf("row %d (k=%d): weighted evaluation at weight 1 picks %#04x, unweighted %#04x", i, k, wr.s[wr.best], us)
		}
		for _, c := range []float64{1, 3.7, 1e-30} {
			w := make([]float64, k)
			for j := range w {
				w[j] = c
			}
			got := make([]byte, len(want))
			var gst Stats
			encodeQ8RowW(got, x, w, new(scratch), &gst)
			if !bytes.Equal(got, want) {
				t.Fatalf("row %d (k=%d) weight %g: bytes differ from the unweighted search", i, k, c)
			}
			if !sameStats(gst, wst) {
				t.Fatalf("row %d weight %g: stats %+v, unweighted %+v", i, c, gst, wst)
			}
			if c == 1 && (gst.SumWSqErr != gst.SumSqErr || gst.SumWSqRef != gst.SumSqRef) {
				t.Fatalf("row %d: weighted terms %+v differ from the plain ones at weight 1", i, gst)
			}
		}
	}
}

// TestQ8WeightedShortcuts: the early stop of an evaluation does not change
// the weighted result either.
func TestQ8WeightedShortcuts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for i, x := range q8TestRows(t, 40) {
		w := to64(lognormalWeights(r, len(x), 1.5))
		a := make([]byte, q8ScaleBytes+len(x))
		b := make([]byte, len(a))
		var sa, sb Stats
		encodeQ8RowW(a, x, w, new(scratch), &sa)
		saPlain = true
		encodeQ8RowW(b, x, w, new(scratch), &sb)
		saPlain = false
		if !bytes.Equal(a, b) || !sameStatsW(sa, sb) {
			t.Fatalf("row %d: shortcuts changed the weighted result", i)
		}
	}
}

// TestQ8WeightedRows: every weighted q8 row has a valid scale whose codes
// all decode to finite values, the error-minimizing code of every element,
// statistics equal to the recomputed ones, and a weighted error no larger
// than the engine's encoder's (its scale is the first candidate, and the
// best codes for a scale minimize every term). The rows where the weighted
// error is above the unweighted search's are counted and logged: that
// result is not among the weighted search's candidates (the refits and the
// local search start from other scales), so it is no bound row by row.
func TestQ8WeightedRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	var worse, rows int
	for i, x := range q8TestRows(t, 100) {
		k := len(x)
		w := to64(lognormalWeights(r, k, 1.5))
		row := make([]byte, q8ScaleBytes+k)
		var st Stats
		encodeQ8RowW(row, x, w, new(scratch), &st)
		s := uint16(row[0]) | uint16(row[1])<<8
		if s&0x8000 != 0 || s >= 0x7f80 || s == 0 {
			t.Fatalf("row %d: scale %#04x", i, s)
		}
		sf := BF16ToFloat32(s)
		dec := make([]float32, k)
		decodeQ8Row(row, dec)
		for j, v := range x {
			c := int8(row[q8ScaleBytes+j])
			if c < -127 || math.IsInf(float64(dec[j]), 0) || dec[j] != dec[j] {
				t.Fatalf("row %d: code %d decodes to %v", i, c, dec[j])
			}
			bq, be := 0, math.Inf(1)
			for m := 0; m <= 127; m++ {
				for _, q := range []int{m, -m} {
					if e := math.Abs(float64(float32(q)*sf) - float64(v)); e < be {
						bq, be = q, e
					}
				}
			}
			if int(c) != bq {
				t.Fatalf("row %d scale %#04x: element %d (%v) has code %d, best %d", i, s, j, v, c, bq)
			}
		}
		if want := statsOfW(dec, x, func(i int) float64 { return w[i] }, k, k); !sameStatsW(st, want) {
			t.Fatalf("row %d: stats %+v, recomputed %+v", i, st, want)
		}
		ec := make([]int8, k)
		edec := make([]float32, k)
		q8Decode(engineQ8Row(x, ec), ec, edec)
		if e := weightedErr(edec, x, w); e <= math.MaxFloat64 && st.SumWSqErr > e {
			t.Fatalf("row %d: weighted error %g above the engine's %g", i, st.SumWSqErr, e)
		}
		urow := make([]byte, len(row))
		encodeQ8Row(Search, urow, x, new(scratch), new(Stats))
		udec := make([]float32, k)
		decodeQ8Row(urow, udec)
		rows++
		if weightedErr(dec, x, w) > weightedErr(udec, x, w) {
			worse++
		}
	}
	t.Logf("q8: weighted error above the unweighted search's on %d of %d rows", worse, rows)
}

// TestQ8WeightedReduces: on the benchmark matrices with lognormal (σ = 1.5)
// column weights, the weighted search's total weighted error is below the
// unweighted search's (asserted in aggregate, logged with the count of
// rows where it is not).
func TestQ8WeightedReduces(t *testing.T) {
	rows := 256
	if testing.Short() {
		rows = 48
	}
	for _, k := range []int{2816, 704} {
		for _, d := range testmat.Dists {
			x := benchValues(t, d, max(1, rows*k/2816))
			w := to64(lognormalWeights(rand.New(rand.NewPCG(uint64(k), 2)), k, 1.5))
			var ew, eu, ref float64
			var worse int
			n := len(x) / k
			row := make([]byte, q8ScaleBytes+k)
			dec := make([]float32, k)
			for i := range n {
				xs := x[i*k : (i+1)*k]
				var st Stats
				encodeQ8RowW(row, xs, w, new(scratch), &st)
				decodeQ8Row(row, dec)
				a := weightedErr(dec, xs, w)
				encodeQ8Row(Search, row, xs, new(scratch), new(Stats))
				decodeQ8Row(row, dec)
				b := weightedErr(dec, xs, w)
				ew, eu, ref = ew+a, eu+b, ref+st.SumWSqRef
				if a > b {
					worse++
				}
			}
			t.Logf("q8 %s K=%d: weighted rel. RMSE (weights) %.5f%% vs unweighted search %.5f%% (Σw·err² %.3f%% lower); worse on %d of %d rows",
				d, k, 100*math.Sqrt(ew/ref), 100*math.Sqrt(eu/ref), 100*(1-ew/eu), worse, n)
			if !(ew < eu) {
				t.Errorf("q8 %s K=%d: weighted error %g not below the unweighted search's %g", d, k, ew, eu)
			}
		}
	}
}

// nvfp4TestRows returns rows of length k for the nvfp4 tests, each with its
// matrix scale: benchmark rows (scale from the row's amax as for a matrix),
// Gaussian blocks of spread magnitudes, and adversarial rows.
func nvfp4TestRows(t testing.TB, k, n int, seed uint64) (rows [][]float32, gs []float32) {
	r := rand.New(rand.NewPCG(seed, 3))
	amax := func(x []float32) float32 {
		var a float32
		for _, v := range x {
			a = max(a, float32(math.Abs(float64(v))))
		}
		return a
	}
	for i := range n {
		var x []float32
		switch i % 4 {
		case 0, 1:
			d := testmat.Dists[i/2%len(testmat.Dists)]
			x = testmat.Values(d, k, seed+uint64(i))
		case 2:
			x = make([]float32, k)
			mag := math.Ldexp(1, r.IntN(80)-40)
			for b := 0; b < k; b += 16 {
				bm := math.Ldexp(mag, -r.IntN(12))
				for j := b; j < b+16; j++ {
					x[j] = float32(r.NormFloat64() * bm)
				}
			}
		default:
			s2 := []float32{1, 0.02 / 2688, 1e-30, 0x1p-112, 1e30}[r.IntN(5)]
			x = nvfp4Adversarial(r, k, s2)
			for j, v := range x {
				if math.IsInf(float64(v), 0) || v != v {
					x[j] = 0
				}
			}
		}
		rows = append(rows, x)
		gs = append(gs, nvfp4Scale2(amax(x)))
	}
	return rows, gs
}

// TestNVFP4WeightedUniform: with all weights 1, or any weight equal over
// every block, the weighted nvfp4 search writes the unweighted searching
// encoder's bytes and plain statistics, and the weighted statistics are the
// per-block sums (the SIMD paths on and off; the kernel always multiplies by
// the normalized weights, 1 here). The scalar weighted estimate with
// weights 1 (without the shortcut for uniform blocks) also picks the
// unweighted scale.
func TestNVFP4WeightedUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, k := range []int{16, 272, 704, 2816, 4096 + 48} {
		rows, gs := nvfp4TestRows(t, k, 24, uint64(k))
		for i, x := range rows {
			bpr := k/2 + k/16
			want := make([]byte, bpr)
			var wst Stats
			encodeNVFP4Row(Search, gs[i], want, x, new(scratch), &wst)
			for b := range k / 16 {
				one := [16]float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
				var cu, cw [16]uint8
				blk := (*[16]float32)(x[16*b:])
				if su, sw := nvfp4BlockSearch(blk, nil, gs[i], &cu), nvfp4BlockSearch(blk, &one, gs[i], &cw); su != sw || cu != cw {
					t.Fatalf("k=%d row %d block %d: weighted estimate at weight 1 picks %#x, unweighted %#x", k, i, b, sw, su)
				}
			}
			blockW := make([]float64, k) // per block a random uniform weight
			for b := 0; b < k; b += 16 {
				c := float64(float32(math.Exp(3 * r.NormFloat64())))
				for j := b; j < b+16; j++ {
					blockW[j] = c
				}
			}
			for _, tc := range []struct {
				name string
				w    []float64
			}{{"ones", ones(k)}, {"uniform per block", blockW}} {
				for _, fast := range []bool{true, false} {
					got := make([]byte, bpr)
					var gst Stats
					run := func() { encodeNVFP4RowW(gs[i], got, x, tc.w, new(scratch), &gst) }
					if fast {
						run()
					} else {
						withoutFastW(run)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("k=%d row %d %s (fast %v): bytes differ from the unweighted search", k, i, tc.name, fast)
					}
					if !sameStats(gst, wst) {
						t.Fatalf("k=%d row %d %s (fast %v): stats %+v, unweighted %+v", k, i, tc.name, fast, gst, wst)
					}
					dec := make([]float32, k)
					decodeNVFP4Row(gs[i], got, dec)
					if want := statsOfW(dec, x, func(i int) float64 { return tc.w[i] }, 1, 16); !sameStatsW(gst, want) {
						t.Fatalf("k=%d row %d %s (fast %v): stats %+v, recomputed %+v", k, i, tc.name, fast, gst, want)
					}
				}
			}
		}
	}
}

// TestNVFP4WeightedBlocks: the row encoder (scalar path, its cached
// weights included) gives every block the scale and codes of nvfp4BlockW on
// that block's weights, for weights of every kind, rows of several matrices
// in turn (the cache changing vectors) and a vector seen again.
func TestNVFP4WeightedBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2))
	const k = 1104 // 69 blocks: 4 batches of 16 and 5 blocks
	rows, gs := nvfp4TestRows(t, k, 16, 77)
	var vecs [][]float64
	for _, sigma := range []float64{0, 0.5, 1.5, 20} {
		vecs = append(vecs, to64(lognormalWeights(r, k, sigma)))
	}
	extreme := make([]float64, k)
	for i := range extreme {
		extreme[i] = float64([]float32{0x1p-149, 0x1.8p-140, 1e-20, 1, 3, math.MaxFloat32}[r.IntN(6)])
	}
	vecs = append(vecs, extreme, vecs[2])
	for vi, w := range vecs {
		for i, x := range rows {
			row := make([]byte, k/2+k/16)
			withoutFastW(func() { encodeNVFP4RowW(gs[i], row, x, w, new(scratch), new(Stats)) })
			for b := range k / 16 {
				var w32 [16]float32
				for j := range w32 {
					w32[j] = float32(w[16*b+j])
				}
				var c [16]uint8
				sc := nvfp4BlockW((*[16]float32)(x[16*b:]), &w32, gs[i], &c)
				if row[k/2+b] != sc {
					t.Fatalf("weights %d row %d block %d: scale %#x, nvfp4BlockW %#x", vi, i, b, row[k/2+b], sc)
				}
				for j := 0; j < 16; j += 2 {
					if got := row[8*b+j/2]; got != c[j]|c[j+1]<<4 {
						t.Fatalf("weights %d row %d block %d: codes %#x, nvfp4BlockW %#x", vi, i, b, got, c[j]|c[j+1]<<4)
					}
				}
			}
		}
	}
}

// TestNVFP4NormWeights: the normalized weights are w·2^−e rounded once to
// float32 with e = ⌊log2 max w⌋ (the largest in [1, 2)), and a block of equal
// weights is reported uniform, for normal and subnormal weights.
func TestNVFP4NormWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for n := range 2000 {
		var w [16]float32
		for j := range w {
			switch n % 4 {
			case 0:
				w[j] = float32(math.Exp(3 * r.NormFloat64()))
			case 1:
				w[j] = math.Float32frombits(1 + uint32(r.IntN(1<<23))) // subnormal
			case 2:
				w[j] = float32(math.Ldexp(1+r.Float64(), r.IntN(270)-149))
			default:
				w[j] = []float32{0.75, 0.75, 3}[r.IntN(3)]
			}
		}
		if n%50 == 0 {
			for j := range w {
				w[j] = w[0]
			}
		}
		v, uniform := nvfp4NormWeights(&w)
		m, lo := w[0], w[0]
		for _, u := range w {
			m, lo = max(m, u), min(lo, u)
		}
		if uniform != (m == lo) {
			t.Fatalf("%v: uniform %v", w, uniform)
		}
		if uniform {
			continue
		}
		_, exp := math.Frexp(float64(m))
		for j, u := range w {
			if want := float32(math.Ldexp(float64(u), 1-exp)); math.Float32bits(v[j]) != math.Float32bits(want) {
				t.Fatalf("%v: v[%d] = %g, want %g", w, j, v[j], want)
			}
			if u == m && !(v[j] >= 1 && v[j] < 2) {
				t.Fatalf("%v: largest normalized weight %g", w, v[j])
			}
		}
	}
}

// nvfp4BlockErrW is the weighted error estimate the weighted search
// compares, of the scale code sc for block x with weights w.
func nvfp4BlockErrW(x *[16]float32, w *[16]float32, sc uint8, g float32) float32 {
	var a [16]float32
	for j, v := range x {
		a[j] = float32(math.Abs(float64(v)))
	}
	v, uniform := nvfp4NormWeights(w)
	if uniform {
		return nvfp4ScaleErr(&a, sc, g)
	}
	return nvfp4ScaleErrW(&a, &v, sc, g)
}

// TestNVFP4WeightedReduces: with lognormal (σ = 1.5) weights, on every block
// the weighted search's estimated weighted error (what it minimizes) is at
// most the unweighted choice's (both are among its candidates), and over the
// benchmark-like rows the true Σ w·err² is lower than the unweighted
// search's (asserted in aggregate; blocks where it is not are counted).
func TestNVFP4WeightedReduces(t *testing.T) {
	for _, k := range []int{2816, 704} {
		n := 64
		if testing.Short() {
			n = 16
		}
		rows, gs := nvfp4TestRows(t, k, n, uint64(k)+1)
		w := to64(lognormalWeights(rand.New(rand.NewPCG(uint64(k), 4)), k, 1.5))
		// Σ w·err² and Σ w·x² of the benchmark rows; the other rows
		// (magnitudes up to 1e30) are compared by Σ of their relative
		// weighted errors Σw·err²/Σw·x².
		var ew, eu, ref [2]float64
		var worse, blocks, changed int
		bpr := k/2 + k/16
		for i, x := range rows {
			kind := min(i%4/2, 1)
			wr, ur := make([]byte, bpr), make([]byte, bpr)
			var st Stats
			encodeNVFP4RowW(gs[i], wr, x, w, new(scratch), &st)
			encodeNVFP4Row(Search, gs[i], ur, x, new(scratch), new(Stats))
			wd, ud := make([]float32, k), make([]float32, k)
			decodeNVFP4Row(gs[i], wr, wd)
			decodeNVFP4Row(gs[i], ur, ud)
			for b := 0; b < k/16; b++ {
				blk := (*[16]float32)(x[b*16:])
				var w32 [16]float32
				for j := range w32 {
					w32[j] = float32(w[b*16+j])
				}
				sw, su := wr[k/2+b], ur[k/2+b]
				if sw != su {
					changed++
				}
				if ea, eb := nvfp4BlockErrW(blk, &w32, sw, gs[i]), nvfp4BlockErrW(blk, &w32, su, gs[i]); ea > eb {
					t.Fatalf("k=%d row %d block %d: weighted estimate %g of the chosen scale above the unweighted choice's %g", k, i, b, ea, eb)
				}
				xs, ws := x[b*16:b*16+16], w[b*16:b*16+16]
				if weightedErr(wd[b*16:b*16+16], xs, ws) > weightedErr(ud[b*16:b*16+16], xs, ws) {
					worse++
				}
				blocks++
			}
			if kind == 0 {
				ew[0] += weightedErr(wd, x, w)
				eu[0] += weightedErr(ud, x, w)
				ref[0] += st.SumWSqRef
			} else if st.SumWSqRef > 0 {
				ew[1] += weightedErr(wd, x, w) / st.SumWSqRef
				eu[1] += weightedErr(ud, x, w) / st.SumWSqRef
				ref[1]++
			}
		}
		t.Logf("nvfp4 K=%d: %d of %d block scales changed; true Σw·err² above the unweighted choice's on %d blocks", k, changed, blocks, worse)
		for kind, name := range []string{"benchmark rows", "other rows (per-row relative errors averaged)"} {
			t.Logf("nvfp4 K=%d %s: weighted rel. RMSE (weights) %.4f%% vs unweighted search %.4f%% (Σw·err² %.3f%% lower)",
				k, name, 100*math.Sqrt(ew[kind]/ref[kind]), 100*math.Sqrt(eu[kind]/ref[kind]), 100*(1-ew[kind]/eu[kind]))
			if !(ew[kind] < eu[kind]) {
				t.Errorf("nvfp4 K=%d %s: weighted error %g not below the unweighted search's %g", k, name, ew[kind], eu[kind])
			}
		}
	}
}

// encodeImportance encodes src through the public path: NewEncoder(f,
// Search), the scan and SetAmax for nvfp4, SetImportance(w) (nil: none),
// then EncodeRows in the given chunks of rows (nil: one call), the chunks
// concurrently when concurrent is set.
func encodeImportance(t testing.TB, f Format, dt DType, m Matrix, src []byte, w []float32, chunks []int64, concurrent ...bool) ([]byte, Stats) {
	t.Helper()
	e, err := NewEncoder(f, dt, m, Search)
	if err != nil {
		t.Fatal(err)
	}
	l := e.Layout()
	if e.NeedsScan() {
		per := int64(len(src)) / l.Matrices
		for mat := range l.Matrices {
			a, err := e.ScanRows(src[mat*per : (mat+1)*per])
			if err != nil {
				t.Fatal(err)
			}
			e.SetAmax(mat, a)
		}
	}
	if w != nil {
		if err := e.SetImportance(w); err != nil {
			t.Fatal(err)
		}
		if !e.Weighted() {
			t.Fatal("Weighted() is false after SetImportance")
		}
	}
	out := make([]byte, l.Size())
	if chunks == nil {
		chunks = []int64{m.Rows}
	}
	srcRow := m.K * int64(dt.Size())
	var (
		st   Stats
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for i, n := range chunks {
		r0 := int64(0)
		for _, c := range chunks[:i] {
			r0 += c
		}
		s0, s1 := l.Span(r0, n)
		job := func() {
			s, err := e.EncodeRows(out[s0:s1], src[r0*srcRow:(r0+n)*srcRow], r0, n)
			mu.Lock()
			defer mu.Unlock()
			st.Merge(s)
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(concurrent) > 0 && concurrent[0] {
			wg.Go(job)
		} else {
			job()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	return out, st
}

// TestEncodeRowsImportance: the public path. For q8 and nvfp4, every
// dtype, plain and 3-D (expert) shapes: the Stats that EncodeRows returns
// equal, bit for bit, those recomputed from DecodeRows as documented in
// search_w.go (plain and weighted terms, each matrix with its own weights);
// the encoding meets the bounds of checkRoundTrip; rows encoded in chunks,
// serially or concurrently, give the same bytes and statistics up to
// summation order; weights of 1 give the unweighted encoder's bytes and
// plain statistics; and the SIMD and scalar nvfp4 paths agree.
func TestEncodeRowsImportance(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 8))
	shapes := [][]int64{{1, 16}, {5, 704}, {4, 2816}, {2, 3, 256}, {3, 2, 528}, {9, 96}}
	for _, f := range []Format{Q8, NVFP4} {
		for _, dt := range allDTypes {
			for _, shape := range shapes {
				m := mustFlatten(t, shape)
				name := fmt.Sprintf("%s %s %v", f, dt, shape)
				src := gaussSource(r.Uint64(), dt, int(m.Elements()))
				if r.IntN(2) == 0 {
					src = randomSource(r, dt, int(m.Elements()))
				}
				x := sourceFloats(t, dt, src)
				w := lognormalWeights(r, int(m.Matrices()*m.K), 1.5)
				enc, st := encodeImportance(t, f, dt, m, src, w, nil)
				dec := decodeAll(t, f, dt, m, enc)
				rowsPer := m.Rows / m.Matrices()
				wAt := func(i int) float64 {
					row, col := int64(i)/m.K, int64(i)%m.K
					return float64(w[row/rowsPer*m.K+col])
				}
				pg, wg := int(m.K), int(m.K) // q8: per row
				if f == NVFP4 {
					pg, wg = 1, 16
				}
				if want := statsOfW(dec, x, wAt, pg, wg); !sameStatsW(st, want) {
					t.Errorf("%s: stats %+v, recomputed from DecodeRows %+v", name, st, want)
				}
				checkRoundTrip(t, name, f, Search, dt, m, src, enc, st)
				// Chunks: same bytes.
				var chunks []int64
				for left := m.Rows; left > 0; {
					n := min(left, 1+r.Int64N(3))
					chunks = append(chunks, n)
					left -= n
				}
				for _, conc := range []bool{false, true} {
					if enc2, st2 := encodeImportance(t, f, dt, m, src, w, chunks, conc); !bytes.Equal(enc2, enc) || !statsClose(st2, st) ||
						!closeRel(st2.SumWSqErr, st.SumWSqErr, 0x1p-40) || !closeRel(st2.SumWSqRef, st.SumWSqRef, 0x1p-40) {
						t.Errorf("%s: chunked encoding (concurrent %v) differs", name, conc)
					}
				}
				if f == NVFP4 {
					var ref []byte
					var rst Stats
					withoutFastW(func() { ref, rst = encodeImportance(t, f, dt, m, src, w, nil) })
					if !bytes.Equal(ref, enc) || !sameStatsW(rst, st) {
						t.Errorf("%s: SIMD and scalar weighted encodings differ", name)
					}
				}
				// Weights of 1: the unweighted bytes and plain stats.
				one := make([]float32, len(w))
				for i := range one {
					one[i] = 1
				}
				enc1, st1 := encodeImportance(t, f, dt, m, src, one, nil)
				encU, stU := encodeImportance(t, f, dt, m, src, nil, nil)
				if !bytes.Equal(enc1, encU) {
					t.Errorf("%s: weights of 1 change the encoding", name)
				}
				// The plain terms are the unweighted encoder's; the weighted
				// ones equal them where they are summed the same way (q8).
				if !sameStats(st1, stU) || f == Q8 && (st1.SumWSqErr != st1.SumSqErr || st1.SumWSqRef != st1.SumSqRef) {
					t.Errorf("%s: weights of 1: stats %+v, unweighted %+v", name, st1, stU)
				}
			}
		}
	}
}

// TestSetImportanceRefusals: wrong lengths, weights that are not finite and
// > 0, the min/max method and the raw format are refused with ErrImportance
// (and leave the encoder unweighted).
func TestSetImportanceRefusals(t *testing.T) {
	m := mustFlatten(t, []int64{2, 3, 32})
	good := func() []float32 {
		w := make([]float32, 2*32)
		for i := range w {
			w[i] = 1
		}
		return w
	}
	for _, f := range []Format{Q4, Q8, NVFP4} {
		e, err := NewEncoder(f, BF16, m, Search)
		if err != nil {
			t.Fatal(err)
		}
		bad := map[string][]float32{
			"empty":      nil,
			"short":      good()[:63],
			"long":       append(good(), 1),
			"one matrix": good()[:32],
		}
		for name, v := range map[string]float32{
			"zero": 0, "negative zero": float32(math.Copysign(0, -1)), "negative": -1,
			"NaN": float32(math.NaN()), "+Inf": float32(math.Inf(1)), "-Inf": float32(math.Inf(-1)),
		} {
			w := good()
			w[37] = v
			bad[name] = w
		}
		for name, w := range bad {
			if err := e.SetImportance(w); !errors.Is(err, ErrImportance) {
				t.Errorf("%s %s: error %v, want ErrImportance", f, name, err)
			}
			if e.Weighted() {
				t.Errorf("%s %s: encoder weighted after a refused SetImportance", f, name)
			}
		}
		if err := e.SetImportance(good()); err != nil {
			t.Errorf("%s: valid weights refused: %v", f, err)
		}
		small := good()
		small[5] = 0x1p-149 // the smallest float32 > 0 is valid
		if err := e.SetImportance(small); err != nil {
			t.Errorf("%s: subnormal weight refused: %v", f, err)
		}
	}
	for _, tc := range []struct {
		f      Format
		method Method
	}{{Q8, MinMax}, {NVFP4, MinMax}, {Q4, MinMax}, {Raw, Search}, {Raw, MinMax}} {
		e, err := NewEncoder(tc.f, BF16, m, tc.method)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SetImportance(good()); !errors.Is(err, ErrImportance) {
			t.Errorf("%s %s: error %v, want ErrImportance", tc.f, tc.method, err)
		}
		if e.Weighted() {
			t.Errorf("%s %s: encoder weighted", tc.f, tc.method)
		}
	}
}

// checkFastWMatches encodes rows with the weighted SIMD kernel and with the
// reference and requires identical bytes and bit-identical statistics.
func checkFastWMatches(t testing.TB, name string, g float32, x []float32, w []float64) {
	t.Helper()
	k := len(x)
	got, want := make([]byte, k/2+k/16), make([]byte, k/2+k/16)
	var gst, wst Stats
	gst.SumSqErr, gst.SumWSqErr = 1, 3 // a running sum to add to
	wst = gst
	encodeNVFP4RowW(g, got, x, w, new(scratch), &gst)
	withoutFastW(func() { encodeNVFP4RowW(g, want, x, w, new(scratch), &wst) })
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: SIMD encoding differs from the reference first at byte %d of %d (%#02x, want %#02x)", name, i, len(want), got[i], want[i])
	}
	if !sameStatsW(gst, wst) {
		t.Fatalf("%s: SIMD stats %+v, reference %+v", name, gst, wst)
	}
}

// TestNVFP4FastWMatchesReference: the weighted AVX-512 kernel is
// bit-identical to the reference on the rows of the unweighted kernel's test
// (Gaussian blocks of many magnitudes, adversarial blocks, mismatched matrix
// scales) with assorted weights: lognormal, uniform per block, a few equal
// values, ranges from the smallest subnormal to the largest float32, powers
// of two.
func TestNVFP4FastWMatchesReference(t *testing.T) {
	if nvfp4FastW == nil {
		t.Skip("no SIMD nvfp4 path in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(17, 6))
	weights := map[string]func(i int) float32{
		"lognormal": func(int) float32 { return float32(math.Exp(1.5 * r.NormFloat64())) },
		"wide":      func(int) float32 { return float32(math.Exp(20 * r.NormFloat64())) },
		"extreme": func(int) float32 {
			return []float32{0x1p-149, 0x1p-130, 1e-20, 1, 3, math.MaxFloat32, 1e38}[r.IntN(7)]
		},
		"few":  func(int) float32 { return []float32{0.5, 1, 2.5}[r.IntN(3)] },
		"pow2": func(int) float32 { return float32(math.Ldexp(1, r.IntN(60)-30)) },
	}
	var blockW float32
	weights["per block"] = func(i int) float32 {
		if i%16 == 0 {
			blockW = float32(math.Exp(2 * r.NormFloat64()))
		}
		return blockW
	}
	weights["mostly uniform"] = func(i int) float32 {
		if r.IntN(16) == 0 {
			return 1.5
		}
		return 1
	}
	mags := []float64{1, 0.02, 1e-30, 0x1p-101, 0x1p-112, 1e30, 3e37}
	for _, k := range []int{16, 256, 272, 512, 2816, 4096 + 48} {
		for wname, wf := range weights {
			w := make([]float64, k)
			for i := range w {
				w[i] = float64(wf(i))
			}
			for _, mag := range mags {
				x := make([]float32, k)
				for b := 0; b < k; b += 16 {
					bm := math.Ldexp(mag, -r.IntN(12))
					for i := b; i < b+16; i++ {
						x[i] = float32(r.NormFloat64() * bm)
					}
				}
				g := nvfp4Scale2(float32(mag * 4))
				for _, s := range []float32{1, 4, 1.0 / 3, 1e-38} {
					checkFastWMatches(t, fmt.Sprintf("k=%d %s gauss %g g×%g", k, wname, mag, s), g*s, x, w)
				}
			}
			for _, s2 := range []float32{1, 0.02 / 2688, 1e-30, 0x1p-112, 1e30} {
				x := nvfp4Adversarial(r, k, s2)
				ok := true
				for _, v := range x {
					ok = ok && !math.IsInf(float64(v), 0) && v == v
				}
				if ok {
					checkFastWMatches(t, fmt.Sprintf("k=%d %s adversarial %g", k, wname, s2), s2, x, w)
				}
			}
		}
	}
}

// TestNVFP4FastWLarge: long runs of rows, so that the weighted running sums
// cross many binades, with short significands (exact halfway terms).
func TestNVFP4FastWLarge(t *testing.T) {
	if nvfp4FastW == nil {
		t.Skip("no SIMD nvfp4 path in this build or on this CPU")
	}
	r := rand.New(rand.NewPCG(23, 1))
	const k = 4096
	rows := 48
	if testing.Short() {
		rows = 12
	}
	for _, wname := range []string{"lognormal", "pow2"} {
		w := make([]float64, k)
		for i := range w {
			if wname == "pow2" {
				w[i] = math.Ldexp(1, r.IntN(8)-4)
			} else {
				w[i] = float64(float32(math.Exp(1.5 * r.NormFloat64())))
			}
		}
		for _, gen := range []func() float64{
			func() float64 { return r.NormFloat64() * 0.02 },
			func() float64 { return float64(r.IntN(64)-32) / 1024 },
			func() float64 { return math.Ldexp(float64(r.IntN(3)-1), -r.IntN(30)) },
		} {
			g := nvfp4Scale2(1)
			var gst, wst Stats
			for range rows {
				x := make([]float32, k)
				for i := range x {
					x[i] = float32(gen())
				}
				got, want := make([]byte, k/2+k/16), make([]byte, k/2+k/16)
				encodeNVFP4RowW(g, got, x, w, new(scratch), &gst)
				withoutFastW(func() { encodeNVFP4RowW(g, want, x, w, new(scratch), &wst) })
				if !bytes.Equal(got, want) || !sameStatsW(gst, wst) {
					t.Fatalf("%s: SIMD result differs (stats %+v, reference %+v)", wname, gst, wst)
				}
			}
		}
	}
}

// benchImportance encodes rows×k bf16 Gaussian rows through the public
// path, with lognormal importance or without.
func benchImportance(b *testing.B, f Format, k int, weighted bool) {
	const rows = 384
	m := Matrix{Rows: rows, K: int64(k)}
	src := testmat.BF16(testmat.Gaussian, rows*k, 1)
	e, err := NewEncoder(f, BF16, m, Search)
	if err != nil {
		b.Fatal(err)
	}
	if e.NeedsScan() {
		a, err := e.ScanRows(src)
		if err != nil {
			b.Fatal(err)
		}
		e.SetAmax(0, a)
	}
	if weighted {
		if err := e.SetImportance(lognormalWeights(rand.New(rand.NewPCG(1, 1)), k, 1.5)); err != nil {
			b.Fatal(err)
		}
	}
	out := make([]byte, e.Layout().Size())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := e.EncodeRows(out, src, 0, rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
}

// BenchmarkEncodeImportance compares EncodeRows with and without importance
// for q8 and nvfp4 (384 rows of K = 2816 and 704, bf16 Gaussian).
func BenchmarkEncodeImportance(b *testing.B) {
	for _, f := range []Format{Q8, NVFP4} {
		for _, k := range []int{2816, 704} {
			for _, weighted := range []bool{false, true} {
				name := fmt.Sprintf("%s/K=%d/unweighted", f, k)
				if weighted {
					name = fmt.Sprintf("%s/K=%d/weighted", f, k)
				}
				b.Run(name, func(b *testing.B) { benchImportance(b, f, k, weighted) })
			}
		}
	}
}

// FuzzNVFP4FastWMatchesReference: for any finite source, matrix scale and
// weights (any float32 > 0), the weighted SIMD nvfp4 encoder equals the
// reference bit for bit.
func FuzzNVFP4FastWMatchesReference(f *testing.F) {
	f.Add(uint8(3), []byte{0x80, 0x3f, 0, 0x40, 0x12, 0xb9, 0x33, 0x01}, []byte{0, 0, 0x80, 0x3f, 1, 0, 0, 0}, float32(2.5))
	f.Add(uint8(40), []byte{0xff, 0x7f, 0x7f, 0x00, 0x01, 0x80}, []byte{0xff, 0xff, 0x7f, 0x7f, 0, 0, 0x80, 0x3f}, float32(1e-30))
	f.Add(uint8(17), []byte{0x00, 0x3c, 0x00, 0xbc}, []byte{0, 0, 0x80, 0x3f}, float32(0))
	f.Fuzz(func(t *testing.T, kb uint8, data, wdata []byte, amax float32) {
		if nvfp4FastW == nil {
			t.Skip("no SIMD nvfp4 path")
		}
		k := int(kb%64+1) * 16
		src := fill(4*k, data)
		x := make([]float32, k)
		toFloat32(F32, src, x)
		for i, v := range x {
			if math.IsInf(float64(v), 0) || v != v {
				x[i] = 0
			}
		}
		wb := fill(4*k, wdata)
		w := make([]float64, k)
		for i := range w {
			v := math.Float32frombits(uint32(wb[4*i]) | uint32(wb[4*i+1])<<8 | uint32(wb[4*i+2])<<16 | uint32(wb[4*i+3])<<24)
			v = float32(math.Abs(float64(v)))
			if !(v > 0) || v > math.MaxFloat32 {
				v = 1
			}
			w[i] = float64(v)
		}
		if !(amax >= 0) || amax > math.MaxFloat32 {
			amax = 0
		}
		checkFastWMatches(t, "fuzz", nvfp4Scale2(amax), x, w)
	})
}
