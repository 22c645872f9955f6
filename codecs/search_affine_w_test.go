package codecs

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

// randWeights returns n weights of one of several kinds (finite, > 0).
func randWeights(r *rand.Rand, kind string, n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		var v float64
		switch kind {
		case "ones":
			v = 1
		case "uniform": // (0, 1]
			v = 1 - r.Float64()
		case "lognormal": // σ = 1.5: heavy tails
			v = math.Exp(1.5 * r.NormFloat64())
		case "wide": // 2^−60 .. 2^60
			v = math.Ldexp(1+r.Float64(), r.IntN(121)-60)
		case "extreme": // the float32 extremes among ordinary values
			switch r.IntN(6) {
			case 0:
				v = math.SmallestNonzeroFloat32
			case 1:
				v = math.MaxFloat32
			case 2:
				v = 1e-30
			case 3:
				v = 1e30
			default:
				v = math.Exp(3 * r.NormFloat64())
			}
		case "outlier": // ones with one huge column
			v = 1
			if r.IntN(32) == 0 {
				v = 1e6
			}
		}
		w[i] = float64(float32(v)) // SetImportance takes float32 weights
	}
	return w
}

var weightKinds = []string{"ones", "uniform", "lognormal", "wide", "extreme", "outlier"}

// weightedTerms are Σ w·err² and Σ w·x² of dec against x, like Stats.addW.
func weightedTerms(x, dec []float32, w []float64) (wsse, wref float64) {
	var s Stats
	for j, v := range x {
		s.addW(dec[j], v, w[j])
	}
	return s.SumWSqErr, s.SumWSqRef
}

// checkAffineGroupW checks one weighted result: the plain checks of
// checkAffineGroup except the comparison with the engine (finite bf16
// pair, finite decoded values, lowest error-minimizing codes, plain terms
// equal to the decoded group's), the weighted terms equal to the decoded
// group's, and a weighted error no larger than the engine encoder's.
func checkAffineGroupW(t *testing.T, bits int, x *[32]float32, w *[32]float64, r affineResultW, codes *[32]uint8) {
	t.Helper()
	nmax := 1<<bits - 1
	d, m := r.delta, r.min
	if d&0x8000 != 0 || d >= 0x7f80 || m&0x7fff >= 0x7f80 {
		t.Fatalf("q%d %v: parameters d=%#04x m=%#04x", bits, x, d, m)
	}
	var dec [32]float32
	affineDecode(d, m, codes, &dec)
	for j, v := range dec {
		if int(codes[j]) > nmax || math.IsInf(float64(v), 0) || v != v {
			t.Fatalf("q%d %v: code %d decodes to %v", bits, x, codes[j], v)
		}
	}
	s, ref, a := errTerms(x[:], dec[:])
	ws, wr := weightedTerms(x[:], dec[:], w[:])
	if s != r.sumSqErr || ref != r.sumSqRef || a != r.maxAbsErr || ws != r.sumWSqErr || wr != r.sumWSqRef {
		t.Fatalf("q%d %v w %v: terms %+v, decoded %v %v %v %v %v", bits, x, w, r, s, ref, a, ws, wr)
	}
	df, mf := BF16ToFloat32(d), BF16ToFloat32(m)
	for j, v := range x {
		bq, be := 0, math.Inf(1)
		for q := 0; q <= nmax; q++ {
			e := math.Abs(float64(float32(float32(float32(q)*df)+mf)) - float64(v))
			if e < be {
				bq, be = q, e
			}
		}
		if int(codes[j]) != bq {
			t.Fatalf("q%d %v (d=%#04x m=%#04x): element %d (%v) has code %d, best %d", bits, x, d, m, j, v, codes[j], bq)
		}
	}
	var ec [32]uint8
	ed, em := engineAffineGroup(bits, x, &ec)
	affineDecode(ed, em, &ec, &dec)
	if es, _ := weightedTerms(x[:], dec[:], w[:]); es <= math.MaxFloat64 && r.sumWSqErr > es {
		t.Fatalf("q%d %v w %v: weighted error %v above the engine's %v", bits, x, w, r.sumWSqErr, es)
	}
}

// TestSearchAffineGroupsW checks the weighted reference on random and
// adversarial groups with every kind of weights: checkAffineGroupW, and
// the same result without the evaluation shortcuts.
func TestSearchAffineGroupsW(t *testing.T) {
	n := 6000
	if testing.Short() {
		n = 1200
	}
	groups := randGroups(n, 11)
	r := rand.New(rand.NewPCG(11, 12))
	for _, kind := range weightKinds {
		t.Run(kind, func(t *testing.T) {
			for _, bits := range []int{4, 5, 6} {
				for i := range groups {
					x := &groups[i]
					w := (*[32]float64)(randWeights(r, kind, 32))
					var c, c2 [32]uint8
					res := searchAffineGroupW(bits, x, w, &c)
					checkAffineGroupW(t, bits, x, w, res, &c)
					saPlain = true
					res2 := searchAffineGroupW(bits, x, w, &c2)
					saPlain = false
					if res2 != res || c2 != c {
						t.Fatalf("q%d %v w %v: shortcuts changed the result", bits, x, w)
					}
				}
			}
		})
	}
}

// TestSearchAffineWUniform: with every weight 1 the weighted search gives
// exactly the unweighted search's pair, codes and plain terms, and weighted
// terms equal to the plain ones; for groups (reference and batched) and for
// whole rows.
func TestSearchAffineWUniform(t *testing.T) {
	n := 12000
	if testing.Short() {
		n = 2000
	}
	groups := randGroups(n, 13)
	var ones [32]float64
	for i := range ones {
		ones[i] = 1
	}
	for _, bits := range []int{4, 5, 6} {
		for i := range groups {
			x := &groups[i]
			var c, cw [32]uint8
			d, m, s, r, a := searchAffineGroup(bits, x, &c)
			got := searchAffineGroupW(bits, x, &ones, &cw)
			want := affineResultW{affineResult{d, m, s, r, a}, s, r}
			if got != want || cw != c {
				t.Fatalf("q%d %v: weighted with ones %+v %v, unweighted %+v %v", bits, x, got, cw, want, c)
			}
		}
	}
	// Rows: benchmark matrices and the random groups as rows of 2816.
	const k = 2816
	var x []float32
	for _, d := range testmat.Dists {
		x = append(x, benchValues(t, d, 4)...)
	}
	for i := range groups[:len(groups)/88*88] {
		x = append(x, groups[i][:]...)
	}
	src := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(v))
	}
	w := make([]float64, k)
	for i := range w {
		w[i] = 1
	}
	for _, bits := range []int{4, 5, 6} {
		bb := 4 + 4*bits
		dst := make([]byte, len(x)/32*bb)
		dstW := make([]byte, len(x)/32*bb)
		st := searchAffineRows(F32, bits, dst, src)
		stW := searchAffineRowsW(F32, bits, dstW, src, w)
		if string(dst) != string(dstW) {
			t.Fatalf("q%d rows: weighted with ones differs from unweighted", bits)
		}
		want := st
		want.SumWSqErr, want.SumWSqRef = st.SumSqErr, st.SumSqRef
		if stW != want {
			t.Fatalf("q%d rows: stats %+v, want %+v", bits, stW, want)
		}
	}
}

// TestSearchAffineGroupsWFast checks that searchAffineGroupsW (the AVX-512
// kernel where available) gives exactly searchAffineGroupW's results, on
// the benchmark matrices and adversarial groups mixed into the same
// batches, with every kind of weights, rows of several lengths and batches
// starting anywhere in a row.
func TestSearchAffineGroupsWFast(t *testing.T) {
	n := 8000
	if testing.Short() {
		n = 1600
	}
	groups := randGroups(n, 17)
	var x []float32
	for _, d := range testmat.Dists {
		x = append(x, benchValues(t, d, 2)...)
	}
	for i := range groups {
		x = append(x, groups[i][:]...)
	}
	ng := len(x) / 32
	perm := rand.New(rand.NewPCG(5, 6)).Perm(ng)
	xs := make([]float32, len(x))
	for i, p := range perm {
		copy(xs[32*i:32*i+32], x[32*p:32*p+32])
	}
	r := rand.New(rand.NewPCG(17, 18))
	cases := []struct {
		kind  string
		k     int // row length
		first int // group of the row the batch starts at
	}{
		{"ones", 2816, 0},
		{"uniform", 2816, 3},
		{"lognormal", 2816, 0},
		{"lognormal", 32, 0},
		{"lognormal", 96, 2},
		{"wide", 4096, 127},
		{"extreme", 224, 5},
		{"outlier", 2816, 50},
	}
	for _, c := range cases {
		w := randWeights(r, c.kind, c.k)
		gpr := c.k / 32
		for _, bits := range []int{4, 5, 6} {
			for _, xx := range [][]float32{x, xs} {
				codes := make([]uint8, len(xx))
				res := make([]affineResultW, ng)
				searchAffineGroupsW(bits, xx, w, c.first, codes, res)
				for g := range ng {
					var cw [32]uint8
					col := (c.first + g) % gpr * 32
					want := searchAffineGroupW(bits, (*[32]float32)(xx[32*g:32*g+32]), (*[32]float64)(w[col:col+32]), &cw)
					if res[g] != want || [32]uint8(codes[32*g:32*g+32]) != cw {
						t.Fatalf("%s k=%d q%d group %d %v w %v: fast %+v %v, reference %+v %v", c.kind, c.k, bits, g, xx[32*g:32*g+32], w[col:col+32], res[g], codes[32*g:32*g+32], want, cw)
					}
				}
			}
		}
	}
}

// TestSearchAffineWQuality measures what the weights buy: on the benchmark
// matrices with lognormal column weights (σ = 1.5), the weighted error
// Σ w·err² of the weighted search against that of the unweighted search's
// result. It asserts a reduction of at least 5% for q4, q5 and q6 (logged:
// the reduction, the plain error's increase and the share of groups where
// the weighted search is worse).
func TestSearchAffineWQuality(t *testing.T) {
	rows := 256
	if testing.Short() {
		rows = 32
	}
	const k = 2816
	for _, dist := range testmat.Dists {
		x := benchValues(t, dist, rows)
		w := randWeights(rand.New(rand.NewPCG(23, 24)), "lognormal", k)
		for _, bits := range []int{4, 5, 6} {
			var uw, ww, up, wp float64
			worse := 0
			for g := 0; g < len(x)/32; g++ {
				grp := (*[32]float32)(x[32*g : 32*g+32])
				wg := (*[32]float64)(w[g%(k/32)*32:])
				var c [32]uint8
				var dec [32]float32
				d, m, s, _, _ := searchAffineGroup(bits, grp, &c)
				affineDecode(d, m, &c, &dec)
				u, _ := weightedTerms(grp[:], dec[:], wg[:])
				res := searchAffineGroupW(bits, grp, wg, &c)
				if res.sumWSqErr > u {
					worse++
				}
				uw += u
				ww += res.sumWSqErr
				up += s
				wp += res.sumSqErr
			}
			red := 1 - ww/uw
			t.Logf("%s q%d lognormal σ=1.5: Σw·err² %.2f%% lower than the unweighted search's (plain Σerr² %+.2f%%); worse in %d of %d groups",
				dist, bits, 100*red, 100*(wp/up-1), worse, len(x)/32)
			if red < 0.05 {
				t.Errorf("%s q%d: weighted error only %.2f%% below the unweighted search's, want ≥ 5%%", dist, bits, 100*red)
			}
		}
	}
}

// TestEncoderImportanceAffine encodes through the Encoder with importance:
// the statistics equal those of the decoded tensor (plain and weighted, per
// matrix weights for an expert stack), encoding in chunks gives the same
// bytes, uniform importance gives the unweighted bytes, and a bad
// importance vector is refused with ErrImportance.
func TestEncoderImportanceAffine(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	for _, f := range []Format{Q4, Q5, Q6} {
		for _, tc := range []struct {
			name  string
			shape []int64
			kind  string
		}{
			{"matrix", []int64{7, 96}, "lognormal"},
			{"experts", []int64{3, 5, 64}, "wide"},
			{"ones", []int64{9, 128}, "ones"},
		} {
			m, err := FlattenShape(tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			vals := testmat.Values(testmat.StudentT, int(m.Elements()), 31)
			src := make([]byte, 2*len(vals))
			for i, v := range vals {
				binary.LittleEndian.PutUint16(src[2*i:], Float32ToBF16(v))
			}
			w64 := randWeights(r, tc.kind, int(m.Matrices()*m.K))
			w := make([]float32, len(w64))
			for i, v := range w64 {
				w[i] = float32(v)
			}
			encode := func(cuts []int64) ([]byte, Stats) {
				e, err := NewEncoder(f, BF16, m, Search)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.SetImportance(w); err != nil {
					t.Fatal(err)
				}
				l := e.Layout()
				out := make([]byte, l.Size())
				var st Stats
				for i := 0; i+1 < len(cuts); i++ {
					start, end := l.Span(cuts[i], cuts[i+1]-cuts[i])
					s, err := e.EncodeRows(out[start:end], src[cuts[i]*m.K*2:cuts[i+1]*m.K*2], cuts[i], cuts[i+1]-cuts[i])
					if err != nil {
						t.Fatal(err)
					}
					st.Merge(s)
				}
				return out, st
			}
			enc, st := encode([]int64{0, m.Rows})
			dec := make([]float32, m.Elements())
			if err := DecodeRows(f, BF16, m, enc, 0, m.Rows, dec); err != nil {
				t.Fatal(err)
			}
			x := make([]float32, m.Elements())
			toFloat32(BF16, src, x)
			var want Stats
			rowsPer := m.Rows / m.Matrices()
			for row := range m.Rows {
				wm := w64[row/rowsPer*m.K:]
				for g := int64(0); g < m.K; g += 32 {
					var gs Stats
					for j := g; j < g+32; j++ {
						gs.addW(dec[row*m.K+j], x[row*m.K+j], wm[j])
					}
					want.mergeGroup(gs.SumSqErr, gs.SumSqRef, gs.MaxAbsErr, 32)
					want.SumWSqErr += gs.SumWSqErr
					want.SumWSqRef += gs.SumWSqRef
				}
			}
			// One matrix: exactly the decoded terms; an expert stack: the
			// sums of runs of rows of one matrix are merged, so the last
			// bits may differ from one running sum.
			close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }
			if m.Matrices() == 1 && st != want || st.N != want.N || st.MaxAbsErr != want.MaxAbsErr ||
				!close(st.SumSqErr, want.SumSqErr) || !close(st.SumSqRef, want.SumSqRef) ||
				!close(st.SumWSqErr, want.SumWSqErr) || !close(st.SumWSqRef, want.SumWSqRef) {
				t.Fatalf("%s %s: stats %+v, decoded %+v", f, tc.name, st, want)
			}
			if got, _ := encode([]int64{0, 1, m.Rows / 2, m.Rows}); string(got) != string(enc) {
				t.Fatalf("%s %s: chunked encoding differs", f, tc.name)
			}
			if tc.kind == "ones" {
				plain, _, err := EncodeTensor(f, BF16, m, Search, src)
				if err != nil {
					t.Fatal(err)
				}
				if string(plain) != string(enc) {
					t.Fatalf("%s %s: uniform importance differs from no importance", f, tc.name)
				}
			}
		}
		e, err := NewEncoder(f, BF16, Matrix{Rows: 2, K: 32}, Search)
		if err != nil {
			t.Fatal(err)
		}
		with := func(i int, v float32) []float32 { // 32 ones, element i set to v
			w := make([]float32, 32)
			for j := range w {
				w[j] = 1
			}
			w[i] = v
			return w
		}
		for _, c := range []struct {
			name string
			w    []float32
		}{
			{"short", with(0, 1)[:31]},
			{"long", append(with(0, 1), 1)},
			{"zero", with(3, 0)},
			{"negative", with(31, -1)},
			{"nan", with(7, float32(math.NaN()))},
			{"inf", with(0, float32(math.Inf(1)))},
		} {
			w := c.w
			if err := e.SetImportance(w); !errors.Is(err, ErrImportance) {
				t.Errorf("%s %s weights: %v, want ErrImportance", f, c.name, err)
			}
		}
	}
}

func benchSearchAffineGroupsW(b *testing.B, bits int) {
	const k = 2816
	x := benchValues(b, testmat.Gaussian, 64)
	w := randWeights(rand.New(rand.NewPCG(1, 2)), "lognormal", k)
	codes := make([]uint8, len(x))
	res := make([]affineResultW, len(x)/32)
	n := 0
	for b.Loop() {
		searchAffineGroupsW(bits, x, w, 0, codes, res)
		n += len(x)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

// BenchmarkSearchAffineGroupsW4/6 run searchAffineGroupsW (the AVX-512
// kernel where the CPU has it) with lognormal weights, on the matrix of
// BenchmarkSearchAffineGroups4/6.
func BenchmarkSearchAffineGroupsW4(b *testing.B) { benchSearchAffineGroupsW(b, 4) }
func BenchmarkSearchAffineGroupsW6(b *testing.B) { benchSearchAffineGroupsW(b, 6) }

// BenchmarkSearchAffineW4 runs the weighted Go reference group by group.
func BenchmarkSearchAffineW4(b *testing.B) {
	const k = 2816
	x := benchValues(b, testmat.Gaussian, 64)
	w := randWeights(rand.New(rand.NewPCG(1, 2)), "lognormal", k)
	var c [32]uint8
	n := 0
	for b.Loop() {
		for g := 0; g+32 <= len(x); g += 32 {
			searchAffineGroupW(4, (*[32]float32)(x[g:g+32]), (*[32]float64)(w[g%k:g%k+32]), &c)
		}
		n += len(x)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

// FuzzSearchAffineW: for any finite bf16 values and weights (positive
// finite float32 bit patterns) the weighted search passes
// checkAffineGroupW, the batched search (the kernel where available) gives
// the reference's results, and weights all 1 give the unweighted result.
func FuzzSearchAffineW(f *testing.F) {
	f.Add(uint8(0), []byte{0x80, 0x3f, 0, 0x40, 0x12, 0xb9}, []byte{0x00, 0x00, 0x80, 0x3f})
	f.Add(uint8(1), []byte{0x7f, 0x7f, 0x7f, 0xff, 0x01, 0x00}, []byte{0x01, 0x00, 0x00, 0x00, 0xff, 0xff, 0x7f, 0x7f})
	f.Add(uint8(2), []byte{0x23, 0x3c, 0x11, 0xbc, 0x80, 0x00}, []byte{0x00, 0x00, 0x20, 0x41, 0xcd, 0xcc, 0xcc, 0x3d})
	f.Fuzz(func(t *testing.T, bb uint8, xb, wb []byte) {
		bits := 4 + int(bb%3)
		src := finiteBF16(8*32, xb)
		x := make([]float32, 8*32)
		toFloat32(BF16, src, x)
		wraw := fill(4*64, wb)
		w := make([]float64, 64)
		for i := range w {
			u := binary.LittleEndian.Uint32(wraw[4*i:]) &^ 0x80000000
			v := math.Float32frombits(u)
			if v == 0 || u >= 0x7f800000 {
				v = 1
			}
			w[i] = float64(v)
		}
		codes := make([]uint8, len(x))
		res := make([]affineResultW, 8)
		searchAffineGroupsW(bits, x, w, 1, codes, res)
		var ones [32]float64
		for i := range ones {
			ones[i] = 1
		}
		for g := range 8 {
			grp := (*[32]float32)(x[32*g : 32*g+32])
			col := (1 + g) % 2 * 32
			var c [32]uint8
			want := searchAffineGroupW(bits, grp, (*[32]float64)(w[col:col+32]), &c)
			checkAffineGroupW(t, bits, grp, (*[32]float64)(w[col:col+32]), want, &c)
			if res[g] != want || [32]uint8(codes[32*g:32*g+32]) != c {
				t.Fatalf("q%d group %d: batched %+v, reference %+v", bits, g, res[g], want)
			}
			d, m, s, r, a := searchAffineGroup(bits, grp, &c)
			var cw [32]uint8
			if u := searchAffineGroupW(bits, grp, &ones, &cw); u != (affineResultW{affineResult{d, m, s, r, a}, s, r}) || cw != c {
				t.Fatalf("q%d group %d: ones %+v, unweighted %v %v %v", bits, g, u, d, m, s)
			}
		}
	})
}

// addW accounts one element with weight w, element by element: the plain
// terms of add and the weighted ones (the encoders sum the weighted terms
// per group; the tests compare within summation rounding or per group).
func (s *Stats) addW(dec, src float32, w float64) {
	e := float64(dec) - float64(src)
	r := float64(src)
	s.SumSqErr += float64(e * e)
	s.SumSqRef += float64(r * r)
	s.SumWSqErr += float64(w * float64(e*e))
	s.SumWSqRef += float64(w * float64(r*r))
	if a := math.Abs(e); a > s.MaxAbsErr {
		s.MaxAbsErr = a
	}
	s.N++
}
