package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	api "github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// MoE tests (skipped without a GPU): the CUDA MoE against the CPU backend in
// exact mode (|out − ref| ≤ moeExactRel·max|ref row| + moeAbs) and in
// PrecisionBF16 (moeFastRel), rows whose K-th and (K+1)-th router
// probabilities are within moeGap not compared; MatMulNT's fast path; and
// timings at the model's shape.

const (
	moeExactRel = 1e-4
	moeFastRel  = 2e-2
	moeAbs      = 1e-6
	moeGap      = 1e-5
	// |c − ref| ≤ matMulFastRel·Σ|a·w|: rounding a to bf16 moves each
	// product by at most 2^-8 of itself (raw bf16 weights), rounding a and a
	// q4 weight to fp16 by at most about 2^-10 (q4).
	matMulFastRel = 2.5e-3
)

// moeProblem is one MoE layer's inputs on the host, with its weights stored.
type moeProblem struct {
	E, K, H, F, rows    int
	router, gateUp, dn  api.TensorData
	routerScale, pes, x []float32
	u                   []float32
	root, eps           float32
	near                []bool // rows near a router tie
}

// moeBF16Bytes converts values to bf16 bytes (round to nearest even).
func moeBF16Bytes(v []float32) []byte {
	out := make([]byte, 2*len(v))
	for i, f := range v {
		u := math.Float32bits(f)
		u += 0x7fff + (u>>16)&1
		out[2*i], out[2*i+1] = byte(u>>16), byte(u>>24)
	}
	return out
}

// moeRandBF16 returns n bf16 values (as bytes), uniform with standard
// deviation sd, generated in parallel chunks (the model-sized weights).
func moeRandBF16(seed uint64, n int, sd float64) []byte {
	out := make([]byte, 2*n)
	const chunk = 1 << 22
	step := float32(sd * math.Sqrt(3) / (1 << 15))
	var wg sync.WaitGroup
	for c0 := 0; c0 < n; c0 += chunk {
		wg.Add(1)
		go func(c0 int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c0)))
			end := min(c0+chunk, n)
			for i := c0; i < end; i += 4 {
				x := rng.Uint64()
				for j := i; j < min(i+4, end); j++ {
					f := (float32(x&0xffff) - (1 << 15) + 0.5) * step
					x >>= 16
					u := math.Float32bits(f)
					u += 0x7fff + (u>>16)&1
					out[2*j], out[2*j+1] = byte(u>>16), byte(u>>24)
				}
			}
		}(c0)
	}
	wg.Wait()
	return out
}

// moeEncode encodes a [rows, k] bf16 tensor (bytes) in format f with the
// searching encoder, stored as mats matrices (shape [mats, rows/mats, k]
// when mats > 1: an expert stack, whose nvfp4 experts each get their own
// matrix scale), rows split over goroutines (codecs encoders take disjoint
// rows concurrently).
func moeEncode(t testing.TB, f codecs.Format, mats, rows, k int, src []byte, name string) api.TensorData {
	t.Helper()
	m := codecs.Matrix{Rows: int64(rows), K: int64(k), Mats: int64(mats)}
	shape := []int64{int64(rows), int64(k)}
	if mats > 1 {
		shape = []int64{int64(mats), int64(rows / mats), int64(k)}
	}
	td := api.TensorData{Name: name, Format: f, DType: codecs.BF16, Shape: shape}
	if f == codecs.Raw {
		td.Bytes = src
		return td
	}
	enc, err := codecs.NewEncoder(f, codecs.BF16, m, codecs.Search)
	if err != nil {
		t.Fatal(err)
	}
	if enc.NeedsScan() {
		e, _, err := codecs.EncodeTensor(f, codecs.BF16, m, codecs.Search, src)
		if err != nil {
			t.Fatal(err)
		}
		td.Bytes = e
		return td
	}
	l := enc.Layout()
	out := make([]byte, l.Size())
	const chunk = 1024
	var wg sync.WaitGroup
	errs := make(chan error, rows/chunk+1)
	for r0 := 0; r0 < rows; r0 += chunk {
		n := min(chunk, rows-r0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, e := l.Span(int64(r0), int64(n))
			if _, err := enc.EncodeRows(out[s:e], src[2*r0*k:2*(r0+n)*k], int64(r0), int64(n)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	td.Bytes = out
	return td
}

// newMoEProblem makes random inputs: router raw bf16, gate/up and down in
// the given formats from the same bf16 values.
func newMoEProblem(t testing.TB, seed uint64, E, K, H, F, rows int, guF, dnF codecs.Format) *moeProblem {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 77))
	p := &moeProblem{E: E, K: K, H: H, F: F, rows: rows, eps: 1e-6, root: float32(1 / math.Sqrt(float64(H)))}
	routerV := make([]float32, E*H)
	for i := range routerV {
		routerV[i] = float32(rng.NormFloat64())
	}
	p.router = moeEncode(t, codecs.Raw, 1, E, H, moeBF16Bytes(routerV), "router")
	// Gate/up pre-activations of a few units, outputs of about one; the
	// experts are stacks [E][2F][H] and [E][H][F], as the pack stores them.
	p.gateUp = moeEncode(t, guF, E, E*2*F, H, moeRandBF16(seed+1, E*2*F*H, 2/math.Sqrt(float64(H))), "gate_up")
	p.dn = moeEncode(t, dnF, E, E*H, F, moeRandBF16(seed+2, E*H*F, 1/math.Sqrt(float64(F))), "down")
	p.routerScale = make([]float32, H)
	for i := range p.routerScale {
		p.routerScale[i] = float32(0.5 + 1.5*rng.Float64())
	}
	p.pes = make([]float32, E)
	for i := range p.pes {
		p.pes[i] = float32(0.3 + 2.7*rng.Float64())
	}
	p.x = make([]float32, rows*H)
	p.u = make([]float32, rows*H)
	for i := range p.x {
		p.x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		p.u[i] = float32(rng.NormFloat64())
	}
	p.near = moeNearTies(p, routerV)
	return p
}

// moeNearTies computes the router probabilities on the host (RMSNorm as the
// runtime, f64 logits and softmax) and marks rows whose K-th and (K+1)-th
// are within moeGap.
func moeNearTies(p *moeProblem, routerV []float32) []bool {
	H, E, K := p.H, p.E, p.K
	w := make([]float64, E*H)
	for i, v := range routerV { // rounded to bf16 as moeBF16Bytes does

		u := math.Float32bits(v)
		u += 0x7fff + (u>>16)&1
		w[i] = float64(math.Float32frombits(u &^ 0xffff))
	}
	near := make([]bool, p.rows)
	r := make([]float64, H)
	pr := make([]float64, E)
	for t := range p.rows {
		x := p.x[t*H : (t+1)*H]
		var ss float64
		for _, v := range x {
			ss += float64(v * v)
		}
		ms := float32(ss)/float32(H) + p.eps
		inv := 1 / float32(math.Sqrt(float64(ms)))
		for i, v := range x {
			r[i] = float64((v * inv * p.routerScale[i]) * p.root)
		}
		mx := math.Inf(-1)
		for e := range E {
			var s float64
			for i, rv := range r {
				s += rv * w[e*H+i]
			}
			pr[e] = s
			mx = max(mx, s)
		}
		var sum float64
		for e := range pr {
			pr[e] = math.Exp(pr[e] - mx)
			sum += pr[e]
		}
		for e := range pr {
			pr[e] /= sum
		}
		s := slices.Clone(pr)
		slices.Sort(s)
		slices.Reverse(s)
		near[t] = K < E && s[K-1]-s[K] < moeGap
	}
	return near
}

// moeSetup uploads a problem to a backend.
type moeSetup struct {
	be                 api.Backend
	out, u, x, rs, pes api.Buf
	router, gateUp, dn api.Weight
	w                  api.MoEWeights
	freeList           []interface{ Free() error }
}

func (s *moeSetup) free() {
	for _, f := range s.freeList {
		f.Free()
	}
}

func newMoESetup(t testing.TB, be api.Backend, p *moeProblem) *moeSetup {
	t.Helper()
	s := &moeSetup{be: be}
	buf := func(n int, v []float32) api.Buf {
		b, err := be.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		s.freeList = append(s.freeList, b)
		if v != nil {
			if err := be.Upload(b, v); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	wt := func(td api.TensorData) api.Weight {
		w, err := be.UploadWeight(td)
		if err != nil {
			t.Fatal(err)
		}
		s.freeList = append(s.freeList, w)
		return w
	}
	s.out = buf(p.rows*p.H, nil)
	s.u, s.x = buf(p.rows*p.H, p.u), buf(p.rows*p.H, p.x)
	s.rs, s.pes = buf(p.H, p.routerScale), buf(p.E, p.pes)
	s.router, s.gateUp, s.dn = wt(p.router), wt(p.gateUp), wt(p.dn)
	s.w = api.MoEWeights{Router: s.router, RouterScale: s.rs, PerExpertScale: s.pes, RouterRoot: p.root, Eps: p.eps,
		GateUp: s.gateUp, Down: s.dn, TopK: p.K}
	return s
}

func (s *moeSetup) run(t testing.TB, rows int) []float32 {
	t.Helper()
	if err := s.be.MoE(s.out, s.u, s.x, rows, s.w); err != nil {
		t.Fatalf("%s MoE: %v", s.be.Name(), err)
	}
	out := make([]float32, rows*s.gateUp.Cols())
	if err := s.be.Download(s.out, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// moeCompare checks got against want per row (skipping rows near a tie) and
// returns the worst error relative to the row's max |ref|.
func moeCompare(t *testing.T, name string, p *moeProblem, got, want []float32, rel float64) float64 {
	t.Helper()
	H := p.H
	worst, skipped, bad := 0.0, 0, 0
	for r := range p.rows {
		if p.near[r] {
			skipped++
			continue
		}
		var m float64
		for _, v := range want[r*H : (r+1)*H] {
			m = max(m, math.Abs(float64(v)))
		}
		for i := r * H; i < (r+1)*H; i++ {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			if !(d <= rel*m+moeAbs) {
				if bad < 5 {
					t.Errorf("%s: out[%d][%d] = %g, want %g (row max %g)", name, r, i-r*H, got[i], want[i], m)
				}
				bad++
			}
			if m > 0 {
				worst = max(worst, d/m)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d values outside %g·max|row|", name, bad, rel)
	}
	if skipped == p.rows {
		t.Errorf("%s: every row near a router tie", name)
	}
	t.Logf("%s: worst %.3g of the row max (bound %g), %d of %d rows near a tie", name, worst, rel, skipped, p.rows)
	return worst
}

// moeBackends returns an exact and a fast CUDA backend, closed at the end
// of the test.
func moeBackends(t testing.TB, d *Device) (exact, fast api.Backend) {
	exact = mustBackend(t, d, Options{})
	fast = mustBackend(t, d, Options{Precision: PrecisionBF16})
	closeAtEnd(t, exact, fast)
	return exact, fast
}

// closeAtEnd closes backends at the end of the test.
func closeAtEnd(t testing.TB, bs ...api.Backend) {
	t.Cleanup(func() {
		for _, b := range bs {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
}

// moeRig returns the backends the MoE tests compare: exact and fast CUDA
// backends, a fast one per fixed q4 tile, and the CPU reference, all closed
// at the end of the test.
func moeRig(t *testing.T) (exact, fast api.Backend, tiles []tileBackend, ref api.Backend) {
	d, _ := device(t)
	exact, fast = moeBackends(t, d)
	ref = cpu.New(0)
	closeAtEnd(t, ref)
	return exact, fast, tileBackends(t, d), ref
}

// tileBackend is a fast backend whose q4 GEMM has a fixed configuration.
type tileBackend struct {
	tag string // "fast-tile32", …
	be  *backend
}

// tileBackends returns a fast backend per fixed q4 tile (Options.Q4Tile),
// closed at the end of the test.
func tileBackends(t testing.TB, d *Device) []tileBackend {
	var out []tileBackend
	for i, tile := range []Q4Tile{Q4Tile32, Q4Tile64, Q4Tile128} {
		b := mustBackend(t, d, Options{Precision: PrecisionBF16, Q4Tile: tile})
		closeAtEnd(t, b)
		out = append(out, tileBackend{fmt.Sprintf("fast-tile%d", q4Configs[i].bm()), b.(*backend)})
	}
	return out
}

var moeFormats = []codecs.Format{codecs.Raw, codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4}

func moeFits(f codecs.Format, k int) bool {
	g := f.GroupSize()
	return !f.Quantized() || f == codecs.Q8 || k%g == 0
}

// TestMoESmall compares MoE with the CPU backend at small odd shapes, every
// expert format (down falls back to raw bf16 where F does not fit the
// format's group), in exact and fast mode.
func TestMoESmall(t *testing.T) {
	exact, fast, tiles, ref := moeRig(t)
	cases := []struct{ E, K, H, F, rows int }{
		{4, 2, 32, 16, 5},
		{16, 4, 96, 40, 33},
		{4, 2, 64, 64, 150}, // over 64 pairs per expert: several tiles
		{5, 5, 33, 17, 9},   // K = E, odd widths (raw only)
		{16, 4, 96, 64, 33},
	}
	for ci, c := range cases {
		for _, f := range moeFormats {
			if !moeFits(f, c.H) {
				continue
			}
			dnF := f
			if !moeFits(f, c.F) {
				dnF = codecs.Raw
			}
			p := newMoEProblem(t, uint64(100+ci), c.E, c.K, c.H, c.F, c.rows, f, dnF)
			name := fmt.Sprintf("E=%d/K=%d/H=%d/F=%d/rows=%d/%s+%s", c.E, c.K, c.H, c.F, c.rows, f, dnF)
			rs := newMoESetup(t, ref, p)
			want := rs.run(t, c.rows)
			rs.free()
			type mode struct {
				be  api.Backend
				rel float64
				tag string
			}
			modes := []mode{{exact, moeExactRel, "exact"}, {fast, moeFastRel, "fast"}}
			if f == codecs.Q4 { // every configuration of the q4 GEMM
				for _, tb := range tiles {
					modes = append(modes, mode{tb.be, moeFastRel, tb.tag})
				}
			}
			for _, m := range modes {
				s := newMoESetup(t, m.be, p)
				got := s.run(t, c.rows)
				s.free()
				moeCompare(t, name+"/"+m.tag, p, got, want, m.rel)
			}
		}
	}
}

var (
	moeRealMu sync.Mutex
	moeReal   = map[codecs.Format]*moeProblem{}
)

// moeRealProblem returns the model-shaped problem (E 128, K 8, H 2816,
// F 704, 1024 rows) with experts in format f (q4 or raw bf16), made once.
func moeRealProblem(t testing.TB, f codecs.Format) *moeProblem {
	moeRealMu.Lock()
	defer moeRealMu.Unlock()
	if p := moeReal[f]; p != nil {
		return p
	}
	p := newMoEProblem(t, 7, 128, 8, 2816, 704, 1024, f, f)
	moeReal[f] = p
	return p
}

// moeQ4Only (-test.short) skips the raw bf16 cases of the MoE and MatMulNT
// tests, whose GPU paths the q4 kernels do not touch.
func moeQ4Only() bool { return testing.Short() }

// TestMoEReal compares MoE with the CPU backend at the model's shape (37 and
// 256 tokens, q4 and raw bf16 experts), exact and fast, and checks that
// repeated calls give the same bits.
func TestMoEReal(t *testing.T) {
	exact, fast, tiles, ref := moeRig(t)
	for _, f := range []codecs.Format{codecs.Q4, codecs.Raw} {
		if f == codecs.Raw && moeQ4Only() {
			continue
		}
		p := moeRealProblem(t, f)
		rs := newMoESetup(t, ref, p)
		es := newMoESetup(t, exact, p)
		fs := newMoESetup(t, fast, p)
		var ts []*moeSetup // per fixed q4 tile
		if f == codecs.Q4 {
			for _, tb := range tiles {
				ts = append(ts, newMoESetup(t, tb.be, p))
			}
		}
		rowsList := []int{37, 256}
		if f == codecs.Q4 {
			rowsList = append(rowsList, 1024)
		}
		for _, rows := range rowsList {
			sub := *p
			sub.rows = rows
			name := fmt.Sprintf("real/%s/rows=%d", f, rows)
			start := time.Now()
			want := rs.run(t, rows)
			t.Logf("%s: CPU reference %v", name, time.Since(start))
			if rows <= 256 {
				got := es.run(t, rows)
				moeCompare(t, name+"/exact", &sub, got, want, moeExactRel)
				got2 := es.run(t, rows)
				if !slices.EqualFunc(got, got2, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Errorf("%s/exact: a second call differs", name)
				}
			}
			gotF := fs.run(t, rows)
			moeCompare(t, name+"/fast", &sub, gotF, want, moeFastRel)
			if rows >= 256 { // every configuration of the q4 GEMM
				for i, s := range ts {
					moeCompare(t, name+"/"+tiles[i].tag, &sub, s.run(t, rows), want, moeFastRel)
				}
			}
		}
		rs.free()
		es.free()
		fs.free()
		for _, s := range ts {
			s.free()
		}
	}
}

// moeTime returns the mean wall time of reps calls of f, after warm calls,
// with a Sync before the clock starts and before it stops.
func moeTime(t testing.TB, be api.Backend, warm, reps int, f func() error) time.Duration {
	t.Helper()
	for range warm {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range reps {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start) / time.Duration(reps)
}

// errMoEStop ends a timed MoE call after a stage (moePrefixTime).
var errMoEStop = errors.New("moe: stopped after a stage")

// moePrefixTime returns the mean time per call of reps MoE calls queued back
// to back that stop after stage last (no Sync between them): the pipelined
// cost of the stages up to last, host launch overhead included.
func moePrefixTime(t testing.TB, fb *backend, s *moeSetup, rows, reps int, last string) time.Duration {
	t.Helper()
	call := func() error {
		err := fb.moe(s.out, s.u, s.x, rows, s.w, func(name string) error {
			if name == last {
				return errMoEStop
			}
			return nil
		})
		if errors.Is(err, errMoEStop) {
			return nil
		}
		return err
	}
	return moeTime(t, fb, 2, reps, call)
}

// moeGEMMTime returns the mean device time of the fast gate/up (gateup) or
// down GEMM alone, launched reps times back to back on the scratch that the
// last MoE call of rows tokens left (a backend whose q4 tile is fixed, so
// that one tile table serves both GEMMs).
func moeGEMMTime(t testing.TB, fb *backend, s *moeSetup, rows, reps int, gateup bool) time.Duration {
	t.Helper()
	E, K := s.w.GateUp.Rows()/(2*s.w.Down.Cols()), s.w.TopK
	H, F := s.w.GateUp.Cols(), s.w.Down.Cols()
	P := int64(rows) * int64(K)
	cfg, _ := fb.q4Pick(float64(P)/float64(E), P+int64(E)*128)
	fTiles := (P + int64(E)*int64(cfg.bm()-1)) / int64(cfg.bm())
	ptr := func(name string) Ptr { return fb.scratch.bufs[name].Ptr() }
	tiles := ptr("moe.tiles")
	gu, _ := fb.weight(s.w.GateUp)
	dn, _ := fb.weight(s.w.Down)
	return moeTime(t, fb, 1, reps, func() error {
		if gateup {
			return fb.q4Launch(cfg, q4GateUp, gu, ptr("moe.ab"), ptr("moe.ainv"), ptr("moe.pairs"), tiles,
				ptr("moe.wts"), ptr("moe.z"), H, F, 0, K, [3]uint32{uint32((F + 63) / 64), uint32(fTiles), 1})
		}
		return fb.q4Launch(cfg, q4Down, dn, ptr("moe.zb"), ptr("moe.zinv"), ptr("moe.pairs"), tiles,
			ptr("moe.wts"), ptr("moe.y"), F, H, 0, K, [3]uint32{uint32((H + 127) / 128), uint32(fTiles), 1})
	})
}

func msOf(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// TestMoEFastTiming logs the time of one MoE call at the model's shape with
// q4 experts (256 and 1024 tokens; budget ~0.25 ms and ~1 ms per layer), in
// fast and exact mode; the fast mode's per-stage times (each stage followed
// by a Sync, so their sum exceeds the whole) and pipelined prefixes (calls
// that stop after a stage, back to back); and, for every configuration of
// the q4 GEMM, the whole call and the gate/up and down GEMMs alone.
func TestMoEFastTiming(t *testing.T) {
	d, _ := device(t)
	exact, fast := moeBackends(t, d)
	p := moeRealProblem(t, codecs.Q4)
	fs := newMoESetup(t, fast, p)
	defer fs.free()
	es := newMoESetup(t, exact, p)
	defer es.free()
	fb := fast.(*backend)
	tiles := tileBackends(t, d)
	var ts []*moeSetup
	for _, tb := range tiles {
		s := newMoESetup(t, tb.be, p)
		defer s.free()
		ts = append(ts, s)
	}
	// Host cost of a kernel launch (an empty narrow_bf16, 200 back to back).
	if mm, err := fb.mmaModule(); err == nil {
		tl := moeTime(t, fast, 5, 200, func() error {
			return mm.Launch(mmaNarrowBF16, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, Ptr(0), Ptr(0), uint64(0))
		})
		t.Logf("kernel launch: %.1f µs each, back to back", float64(tl.Nanoseconds())/1e3)
	}
	// Device-to-device copy bandwidth, for scale (read + write).
	if a, err := d.Alloc(512 << 20); err == nil {
		if b, err := d.Alloc(512 << 20); err == nil {
			tc := moeTime(t, fast, 1, 5, func() error { return b.CopyFrom(0, a, 0, 512<<20) })
			t.Logf("device copy: %.0f GB/s (read + write of 512 MiB in %.3f ms)", 2*float64(512<<20)/tc.Seconds()/1e9, msOf(tc))
			b.Free()
		}
		a.Free()
	}
	for _, rows := range []int{256, 1024} {
		call := func(s *moeSetup) func() error {
			return func() error { return s.be.MoE(s.out, s.u, s.x, rows, s.w) }
		}
		tf := moeTime(t, fast, 3, 20, call(fs))
		te := moeTime(t, exact, 1, 3, call(es))
		stages := map[string]time.Duration{}
		var order []string
		const reps = 5
		for range reps {
			last := time.Now()
			err := fb.moe(fs.out, fs.u, fs.x, rows, fs.w, func(name string) error {
				if err := fb.Sync(); err != nil {
					return err
				}
				now := time.Now()
				if _, ok := stages[name]; !ok {
					order = append(order, name)
				}
				stages[name] += now.Sub(last)
				last = now
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		msg := ""
		for _, n := range order {
			msg += fmt.Sprintf(" %s %.3f", n, msOf(stages[n])/reps)
		}
		pre := ""
		for _, n := range order[:len(order)-1] {
			pre += fmt.Sprintf(" …%s %.3f", n, msOf(moePrefixTime(t, fb, fs, rows, 20, n)))
		}
		t.Logf("MoE E=128 K=8 H=2816 F=704 q4, %d tokens: fast %.3f ms/call, exact %.3f ms/call; fast stages (ms, synced):%s; pipelined prefixes (ms):%s",
			rows, msOf(tf), msOf(te), msg, pre)
		for i, tb := range tiles {
			k := q4Configs[i]
			tk := moeTime(t, tb.be, 2, 20, call(ts[i]))
			tg := moeGEMMTime(t, tb.be, ts[i], rows, 20, true)
			td := moeGEMMTime(t, tb.be, ts[i], rows, 20, false)
			t.Logf("  %d tokens, %-11s (bm %3d, %3d threads, %3d KiB): %.3f ms/call; gate/up GEMM %.3f ms (%.0f GB/s of weights), down GEMM %.3f ms (%.0f GB/s)",
				rows, tb.tag, k.bm(), k.threads(), k.smem()>>10, msOf(tk), msOf(tg), float64(len(p.gateUp.Bytes))/tg.Seconds()/1e9,
				msOf(td), float64(len(p.dn.Bytes))/td.Seconds()/1e9)
		}
	}
}

func benchmarkMoEFast(b *testing.B, rows int) {
	d, _ := device(b)
	_, fast := moeBackends(b, d)
	p := moeRealProblem(b, codecs.Q4)
	s := newMoESetup(b, fast, p)
	defer s.free()
	if err := fast.MoE(s.out, s.u, s.x, rows, s.w); err != nil {
		b.Fatal(err)
	}
	if err := fast.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := fast.MoE(s.out, s.u, s.x, rows, s.w); err != nil {
			b.Fatal(err)
		}
	}
	if err := fast.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMoEFast256 and BenchmarkMoEFast1024 time one layer's MoE (q4
// experts, PrecisionBF16) at the model's shape.
func BenchmarkMoEFast256(b *testing.B)  { benchmarkMoEFast(b, 256) }
func BenchmarkMoEFast1024(b *testing.B) { benchmarkMoEFast(b, 1024) }

// TestMatMulFast compares MatMulNT's fast path (raw bf16: cuBLAS GemmEx on
// bf16 activations; q4: q4_dense) with the CPU backend's MatMulNT within
// matMulFastRel·Σ|a·w|, and logs its time at 256×2816×2816.
func TestMatMulFast(t *testing.T) {
	d, _ := device(t)
	_, fastBE := moeBackends(t, d)
	fb := fastBE.(*backend)
	tiles := tileBackends(t, d)
	ref := cpu.New(0)
	defer ref.Close()
	rng := rand.New(rand.NewPCG(41, 42))
	for _, f := range []codecs.Format{codecs.Raw, codecs.Q4} {
		if f == codecs.Raw && moeQ4Only() {
			continue
		}
		for _, sh := range [][2]int{{5, 64}, {37, 96}, {3, 32}, {704, 2816}, {2816, 704}, {2112, 2816}} {
			n, k := sh[0], sh[1]
			td := moeEncode(t, f, 1, n, k, moeRandBF16(rng.Uint64(), n*k, 1), "w")
			wr, err := ref.UploadWeight(td)
			if err != nil {
				t.Fatal(err)
			}
			wg, err := fb.UploadWeight(td)
			if err != nil {
				t.Fatal(err)
			}
			wdec := make([]float32, n*k)
			if err := codecs.DecodeRows(td.Format, td.DType, codecs.Matrix{Rows: int64(n), K: int64(k)}, td.Bytes, 0, int64(n), wdec); err != nil {
				t.Fatal(err)
			}
			for _, m := range []int{1, 7, 70, 256} {
				a := make([]float32, m*k)
				for i := range a {
					a[i] = float32(rng.NormFloat64())
				}
				run := func(be api.Backend, w api.Weight, fastPath bool) []float32 {
					ab, _ := be.Alloc(m * k)
					cb, _ := be.Alloc(m*n + 3)
					defer ab.Free()
					defer cb.Free()
					if err := be.Upload(ab, a); err != nil {
						t.Fatal(err)
					}
					if fastPath {
						gb := be.(*backend)
						ca, _ := gb.buf(cb)
						aa, _ := gb.buf(ab)
						cw, _ := gb.weight(w)
						handled, err := gb.matMulFast(ca.b.Ptr(), aa.b.Ptr(), cw, m)
						if err != nil || !handled {
							t.Fatalf("matMulFast %s %dx%d m=%d: handled %v, %v", f, n, k, m, handled, err)
						}
					} else if err := be.MatMulNT(cb, ab, w, m); err != nil {
						t.Fatal(err)
					}
					out := make([]float32, m*n)
					if err := be.Download(cb, out); err != nil {
						t.Fatal(err)
					}
					return out
				}
				want := run(ref, wr, false)
				sabs := make([]float64, m*n)
				for i := range m {
					for j := range n {
						var s float64
						for l := range k {
							s += math.Abs(float64(a[i*k+l]) * float64(wdec[j*k+l]))
						}
						sabs[i*n+j] = s
					}
				}
				check := func(tag string, got []float32) {
					worst, bad := 0.0, 0
					for i := range m {
						for j := range n {
							s := sabs[i*n+j]
							e := math.Abs(float64(got[i*n+j])-float64(want[i*n+j])) / max(s, 1e-30)
							worst = max(worst, e)
							if !(e <= matMulFastRel) {
								if bad < 3 {
									t.Errorf("%s%s %dx%d m=%d: c[%d][%d] = %g, want %g (Σ|a·w| %g)", f, tag, n, k, m, i, j, got[i*n+j], want[i*n+j], s)
								}
								bad++
							}
						}
					}
					if m == 256 || bad > 0 {
						t.Logf("matMulFast %s%s %dx%d m=%d: worst %.3g of Σ|a·w|, %d bad", f, tag, n, k, m, worst, bad)
					}
				}
				check("", run(fb, wg, true))
				if f == codecs.Q4 && m > 1 && n*k <= 704*2816 { // every configuration of the q4 GEMM
					for _, tb := range tiles {
						wt, err := tb.be.UploadWeight(td)
						if err != nil {
							t.Fatal(err)
						}
						check("/"+tb.tag, run(tb.be, wt, true))
						wt.Free()
					}
				}
			}
			wr.Free()
			wg.Free()
		}
	}
	// Timing at 256×2816×2816 (bf16 GemmEx, q4_dense) and the exact path.
	n, k, m := 2816, 2816, 256
	ab, _ := fb.Alloc(m * k)
	cb, _ := fb.Alloc(m * n)
	defer ab.Free()
	defer cb.Free()
	aa, _ := fb.buf(ab)
	ca, _ := fb.buf(cb)
	for _, f := range []codecs.Format{codecs.Raw, codecs.Q4} {
		td := moeEncode(t, f, 1, n, k, moeRandBF16(9, n*k, 1), "w")
		wg, err := fb.UploadWeight(td)
		if err != nil {
			t.Fatal(err)
		}
		cw, _ := fb.weight(wg)
		tf := moeTime(t, fb, 3, 20, func() error { _, err := fb.matMulFast(ca.b.Ptr(), aa.b.Ptr(), cw, m); return err })
		wf := fb.mustF32(t, cw)
		te := moeTime(t, fb, 3, 20, func() error { return fb.d.MatMulNT(ca.b.Ptr(), aa.b.Ptr(), wf, m, n, k) })
		t.Logf("MatMulNT %s %dx%dx%d: fast %.3f ms, f32 SGEMM on the decoded weight %.3f ms", f, m, n, k,
			float64(tf.Microseconds())/1000, float64(te.Microseconds())/1000)
		wg.Free()
	}
}

// mustF32 decodes w into the scratch "test.f32" and returns its
// address (for timing the exact path's SGEMM alone).
func (c *backend) mustF32(t *testing.T, w *cudaWeight) Ptr {
	p, err := c.scratch.ptr("test.f32", 4*w.geom.Elements())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.dequant(p, w); err != nil {
		t.Fatal(err)
	}
	return p
}
