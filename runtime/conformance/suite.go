package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/model"
)

// Weight shapes [N, K]: the real model's projections and small odd ones.
var weightShapes = [][2]int{
	{5, 64}, {37, 96}, {3, 33}, {1, 1}, {17, 160},
	{704, 2816}, {2816, 704}, {2112, 2816},
}

// RMSNorm shapes [rows, n].
var normShapes = [][2]int{{1, 1}, {2, 7}, {3, 33}, {5, 64}, {1, 2816}, {3, 704}, {4, 2112}, {2, 4096}}

// formatDType is a weight encoding: format and source dtype.
type formatDType struct {
	f  codecs.Format
	dt codecs.DType
}

func (fd formatDType) String() string { return fmt.Sprintf("%s-%s", fd.f, fd.dt) }

// fits reports whether a [rows, k] matrix can be encoded as fd (k a
// multiple of the format's group).
func (fd formatDType) fits(rows, k int) bool {
	_, err := fd.f.Layout(fd.dt, codecs.Matrix{Rows: int64(rows), K: int64(k)})
	return err == nil
}

// formats are the weight encodings tried: format and source dtype.
var formats = []formatDType{
	{codecs.Raw, codecs.BF16}, {codecs.Raw, codecs.F16}, {codecs.Raw, codecs.F32}, {codecs.Q8, codecs.BF16},
	{codecs.Q4, codecs.BF16}, {codecs.Q5, codecs.BF16}, {codecs.Q6, codecs.BF16},
	{codecs.NVFP4, codecs.BF16},
}

// Options select what RunOpts covers and what the backend may do. Run
// takes them from the backend (OptionsFor).
type Options struct {
	// Small keeps every op, every weight format, the small odd shapes and
	// the special values, and drops the cases at the real model's sizes
	// whose cost is in the arithmetic (weights of 704×2816 and larger,
	// attention over 16 heads of 256 and 512 dims, the MoE at the model's
	// widths, a 262144-token vocabulary for Categorical, RowStats and
	// Embed's tall table).
	Small bool
	// Numerics is what the backend's arithmetic may do (its
	// Caps().Numerics): the math-function terms of the bounds follow from
	// its ULP (TolerancesFor), and with FlushSubnormals the suite accepts
	// flushed subnormals. AddScale and Temper are bit-exact with the CPU
	// only under IEEE gradual underflow: on their special values (which
	// hold subnormals) a result is then also accepted when it is bit for
	// bit the value computed with every input and result flushed
	// (addScaleFlushed, temperFlushed). The other bit-exact ops move their
	// values without arithmetic on subnormals (copies, decoders, the bf16
	// rounding's integer code) and stay bit-exact.
	Numerics backend.Numerics
}

// OptionsFor is the suite's options for a backend of caps c: its numerics,
// and the whole suite unless small.
func OptionsFor(c backend.Caps, small bool) Options {
	return Options{Small: small, Numerics: c.Numerics}
}

// skip reports whether a case of the real model's size (huge) is left out.
func (o Options) skip(huge bool) bool { return o.Small && huge }

// Run runs the whole conformance suite on b, as b's Caps say it may
// compute (OptionsFor).
func Run(t T, b backend.Backend) { RunOpts(t, b, OptionsFor(b.Caps(), false)) }

// RunOpts runs the conformance suite on b as o selects: one top-level test
// per entry of tests (Ops lists their names).
func RunOpts(t T, b backend.Backend, o Options) {
	ref := cpu.New(0)
	defer ref.Close()
	s := suite{b: b, ref: ref, o: o, tol: TolerancesFor(o.Numerics, ref.Caps().Numerics)}
	for _, c := range tests {
		t.Run(c.name, func(t T) { c.run(t, s) })
	}
	if err := b.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
}

// suite is what every top-level test gets: the backend under test, the CPU
// reference, the options and the tolerances derived from them.
type suite struct {
	b   backend.Backend
	ref *cpu.Backend
	o   Options
	tol Tolerances
}

// tests are the suite's top-level tests, in order.
var tests = []struct {
	name string
	run  func(t T, s suite)
}{
	{"Buffers", func(t T, s suite) { testBuffers(t, s.b) }},
	{"RMSNorm", func(t T, s suite) { testRMSNorm(t, s.b, s.ref, s.tol) }},
	{"Dequant", func(t T, s suite) { testWeights(t, s.b, s.ref, false, s.o) }},
	{"MatMulNT", func(t T, s suite) { testWeights(t, s.b, s.ref, true, s.o) }},
	{"RoPE", func(t T, s suite) { testRoPE(t, s.b, s.ref, s.tol) }},
	{"Softcap", func(t T, s suite) { testSoftcap(t, s.b, s.ref, s.tol) }},
	{"RowStats", func(t T, s suite) { testRowStats(t, s.b, s.ref, s.o, s.tol) }},
	{"Copy", func(t T, s suite) { testCopy(t, s.b, s.ref) }},
	{"AddScale", func(t T, s suite) { testAddScale(t, s.b, s.ref, s.o) }},
	{"GeluMul", func(t T, s suite) { testGeluMul(t, s.b, s.ref, s.tol) }},
	{"Temper", func(t T, s suite) { testTemper(t, s.b, s.ref, s.o) }},
	{"RoundBF16", func(t T, s suite) { testRoundBF16(t, s.b, s.ref) }},
	{"Embed", func(t T, s suite) { testEmbed(t, s.b, s.ref, s.o) }},
	{"SoftEmbed", func(t T, s suite) { testSoftEmbed(t, s.b, s.ref, s.tol) }},
	{"Attention", func(t T, s suite) { testAttention(t, s.b, s.ref, s.o, s.tol) }},
	{"MoE", func(t T, s suite) { testMoE(t, s.b, s.ref, s.o) }},
	{"Categorical", func(t T, s suite) { testCategorical(t, s.b, s.ref, s.o, s.tol) }},
	{"Errors", func(t T, s suite) { testErrors(t, s.b) }},
}

// Ops lists the suite's top-level tests by name, in the order RunOpts runs
// them (a progress display counts them).
func Ops() []string {
	names := make([]string, len(tests))
	for i, c := range tests {
		names[i] = c.name
	}
	return names
}

// entropySensitivity measures, in float64, what the math functions'
// errors in a row's entropy scale with (Tolerances.EntropyExp): Σ p·|a − ā|
// for the tempered logits a = (z − max z)/T and p = softmax(a), and log S,
// S = Σ exp(a).
func entropySensitivity(z []float32, T float32) (spread, logS float64) {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, float64(v))
	}
	var s, mean float64
	for _, v := range z {
		if a := (float64(v) - m) / float64(T); !math.IsInf(a, -1) {
			w := math.Exp(a)
			s += w
			mean += w * a
		}
	}
	mean /= s
	for _, v := range z {
		if a := (float64(v) - m) / float64(T); !math.IsInf(a, -1) {
			spread += math.Exp(a) / s * math.Abs(a-mean)
		}
	}
	return spread, math.Log(s)
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func same(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// mustBuf allocates n values and uploads v (when not nil).
func mustBuf(t T, b backend.Backend, n int, v []float32) backend.Buf {
	t.Helper()
	buf, err := b.Alloc(n)
	if err != nil {
		t.Fatalf("%s: Alloc(%d): %v", b.Name(), n, err)
	}
	t.Cleanup(func() { buf.Free() })
	if v != nil {
		if err := b.Upload(buf, v); err != nil {
			t.Fatalf("%s: Upload of %d: %v", b.Name(), len(v), err)
		}
	}
	return buf
}

func download(t T, b backend.Backend, buf backend.Buf, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := b.Download(buf, out); err != nil {
		t.Fatalf("%s: Download of %d: %v", b.Name(), n, err)
	}
	return out
}

func testBuffers(t T, b backend.Backend) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 1000, 2816 * 3} {
		v := randVec(rng, n)
		v[0] = float32(math.Inf(-1))
		if n > 2 {
			v[1], v[2] = float32(math.NaN()), math.Float32frombits(1) // NaN, denormal
		}
		buf := mustBuf(t, b, n+5, v)
		if buf.Len() != n+5 {
			t.Errorf("Len = %d, want %d", buf.Len(), n+5)
		}
		got := download(t, b, buf, n)
		for i := range v {
			if !same(got[i], v[i]) {
				t.Fatalf("n=%d: [%d] = %g after a round trip, want %g", n, i, got[i], v[i])
			}
		}
		// A partial upload leaves the rest alone.
		if err := b.Upload(buf, []float32{7}); err != nil {
			t.Fatal(err)
		}
		got = download(t, b, buf, min(n, 2))
		if got[0] != 7 || (n > 1 && !same(got[1], v[1])) {
			t.Errorf("n=%d: after a partial upload: %v", n, got)
		}
	}
}

func testRMSNorm(t T, b, ref backend.Backend, tol Tolerances) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range normShapes {
		rows, n := sh[0], sh[1]
		for _, scaled := range []bool{true, false} {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%dx%d/scaled=%v/inplace=%v", rows, n, scaled, inPlace)
				x := randVec(rng, rows*n)
				for i := range x { // a spread of magnitudes
					x[i] *= float32(math.Exp(rng.NormFloat64() * 2))
				}
				var w []float32
				if scaled {
					w = randVec(rng, n)
				}
				const eps = 1e-6
				want := rmsNormOn(t, ref, x, w, rows, n, eps, false)
				got := rmsNormOn(t, b, x, w, rows, n, eps, inPlace)
				var worst float64
				for i := range want {
					e := math.Abs(float64(got[i]) - float64(want[i]))
					rel := e / math.Max(math.Abs(float64(want[i])), 1e-30)
					worst = max(worst, rel)
					if e > (RMSNormRel+tol.RMSNorm)*math.Abs(float64(want[i]))+tol.SubnormalAbs {
						t.Fatalf("%s: [%d] = %g, want %g (rel %.3g > %.3g)", name, i, got[i], want[i], rel, RMSNormRel+tol.RMSNorm)
					}
				}
				if n >= 704 && !inPlace {
					t.Logf("%s: max rel error %.3g", name, worst)
				}
			}
		}
	}
}

func rmsNormOn(t T, b backend.Backend, x, w []float32, rows, n int, eps float32, inPlace bool) []float32 {
	t.Helper()
	xb := mustBuf(t, b, rows*n, x)
	yb := xb
	if !inPlace {
		yb = mustBuf(t, b, rows*n+3, nil)
	}
	var wb backend.Buf
	if w != nil {
		wb = mustBuf(t, b, n, w)
	}
	if err := b.RMSNorm(yb, xb, wb, rows, n, eps); err != nil {
		t.Fatalf("%s: RMSNorm %dx%d: %v", b.Name(), rows, n, err)
	}
	return download(t, b, yb, rows*n)
}

// Encode encodes a [rows, k] tensor of src values (rounded to dt first) in
// format f, as a pack stores it.
func Encode(f codecs.Format, dt codecs.DType, rows, k int, src []float32) (backend.TensorData, error) {
	m := codecs.Matrix{Rows: int64(rows), K: int64(k)}
	raw := make([]byte, len(src)*dt.Size())
	for i, v := range src {
		switch dt {
		case codecs.BF16:
			u := math.Float32bits(v)
			u += 0x7fff + (u>>16)&1 // round to nearest even (finite inputs)
			raw[2*i], raw[2*i+1] = byte(u>>16), byte(u>>24)
		case codecs.F16:
			u := codecs.Float32ToF16(v)
			raw[2*i], raw[2*i+1] = byte(u), byte(u>>8)
		case codecs.F32:
			u := math.Float32bits(v)
			raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		default:
			return backend.TensorData{}, fmt.Errorf("conformance: source dtype %s", dt)
		}
	}
	enc, _, err := codecs.EncodeTensor(f, dt, m, codecs.Search, raw)
	if err != nil {
		return backend.TensorData{}, err
	}
	return backend.TensorData{Name: fmt.Sprintf("%s-%s-%dx%d", f, dt, rows, k), Format: f, DType: dt,
		Shape: []int64{int64(rows), int64(k)}, Bytes: enc}, nil
}

func testWeights(t T, b, ref backend.Backend, matmul bool, o Options) {
	rng := rand.New(rand.NewPCG(5, 6))
	tried := map[codecs.Format]bool{}
	for _, sh := range weightShapes {
		n, k := sh[0], sh[1]
		if o.skip(n*k > 1<<16) {
			continue
		}
		for _, fd := range formats {
			if _, err := fd.f.Layout(fd.dt, codecs.Matrix{Rows: int64(n), K: int64(k)}); err != nil {
				continue // K not a multiple of the format's group
			}
			big := n*k > 1<<20
			if big && fd.dt != codecs.BF16 {
				continue
			}
			name := fmt.Sprintf("%s-%s/%dx%d", fd.f, fd.dt, n, k)
			td, err := Encode(fd.f, fd.dt, n, k, randVec(rng, n*k))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			tried[fd.f] = true
			wr, err := ref.UploadWeight(td)
			if err != nil {
				t.Fatalf("%s: cpu UploadWeight: %v", name, err)
			}
			wb, err := b.UploadWeight(td)
			if err != nil {
				t.Fatalf("%s: UploadWeight: %v", name, err)
			}
			if wb.Rows() != n || wb.Cols() != k || wb.Format() != fd.f || wb.DType() != fd.dt {
				t.Errorf("%s: weight is %d×%d %s %s", name, wb.Rows(), wb.Cols(), wb.Format(), wb.DType())
			}
			if matmul {
				ms := []int{1, 3, 7}
				if big {
					ms = []int{1, 5}
				}
				for _, m := range ms {
					checkMatMul(t, b, ref, wb, wr, name, m, n, k, rng)
				}
			} else {
				checkDequant(t, b, ref, wb, wr, name, n, k)
			}
			if err := wb.Free(); err != nil {
				t.Errorf("%s: Free: %v", name, err)
			}
		}
	}
	for _, fd := range formats {
		if !tried[fd.f] {
			t.Errorf("format %s was not exercised", fd.f)
		}
	}
}

func checkDequant(t T, b, ref backend.Backend, wb, wr backend.Weight, name string, n, k int) {
	t.Helper()
	want := make([]float32, n*k)
	ob := mustBuf(t, ref, n*k, nil)
	if err := ref.Dequant(ob, wr); err != nil {
		t.Fatalf("%s: cpu Dequant: %v", name, err)
	}
	if err := ref.Download(ob, want); err != nil {
		t.Fatal(err)
	}
	gb := mustBuf(t, b, n*k+1, nil)
	if err := b.Dequant(gb, wb); err != nil {
		t.Fatalf("%s: Dequant: %v", name, err)
	}
	got := download(t, b, gb, n*k)
	for i := range want {
		if !same(got[i], want[i]) {
			t.Fatalf("%s: [%d] = %g (%#08x), want %g (%#08x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	gb.Free()
	ob.Free()
}

func checkMatMul(t T, b, ref backend.Backend, wb, wr backend.Weight, name string, m, n, k int, rng *rand.Rand) {
	t.Helper()
	a := randVec(rng, m*k)
	run := func(be backend.Backend, w backend.Weight) []float32 {
		ab := mustBuf(t, be, m*k, a)
		cb := mustBuf(t, be, m*n+2, nil)
		if err := be.MatMulNT(cb, ab, w, m); err != nil {
			t.Fatalf("%s m=%d: %s MatMulNT: %v", name, m, be.Name(), err)
		}
		out := download(t, be, cb, m*n)
		ab.Free()
		cb.Free()
		return out
	}
	want, got := run(ref, wr), run(b, wb)
	// Σ|a·w| per output, from the reference's own decoding.
	wf := make([]float32, n*k)
	db := mustBuf(t, ref, n*k, nil)
	if err := ref.Dequant(db, wr); err != nil {
		t.Fatal(err)
	}
	if err := ref.Download(db, wf); err != nil {
		t.Fatal(err)
	}
	db.Free()
	var worst float64
	for i := range m {
		for o := range n {
			var mag float64
			for j := range k {
				mag += math.Abs(float64(a[i*k+j]) * float64(wf[o*k+j]))
			}
			g, w := float64(got[i*n+o]), float64(want[i*n+o])
			e := math.Abs(g - w)
			if mag > 0 {
				worst = max(worst, e/mag)
			}
			if !(e <= MatMulRel*mag) {
				t.Fatalf("%s m=%d: c[%d][%d] = %g, want %g (error %.3g, Σ|a·w| %.3g)", name, m, i, o, g, w, e, mag)
			}
		}
	}
	if n*k > 1<<16 {
		t.Logf("%s m=%d: max error/Σ|a·w| %.3g", name, m, worst)
	}
}

func testErrors(t T, b backend.Backend) {
	if _, err := b.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
	x := mustBuf(t, b, 8, make([]float32, 8))
	y := mustBuf(t, b, 8, nil)
	if err := b.Upload(x, make([]float32, 9)); err == nil {
		t.Error("Upload past the end succeeded")
	}
	if err := b.Download(x, make([]float32, 9)); err == nil {
		t.Error("Download past the end succeeded")
	}
	if err := b.RMSNorm(y, x, nil, 3, 3, 1e-6); err == nil {
		t.Error("RMSNorm past the end succeeded")
	}
	w := mustBuf(t, b, 2, nil)
	if err := b.RMSNorm(y, x, w, 2, 4, 1e-6); err == nil {
		t.Error("RMSNorm with a short w succeeded")
	}
	td, err := Encode(codecs.Q4, codecs.BF16, 2, 32, make([]float32, 64))
	if err != nil {
		t.Fatal(err)
	}
	bad := td
	bad.Bytes = bad.Bytes[:len(bad.Bytes)-1]
	if _, err := b.UploadWeight(bad); err == nil {
		t.Error("UploadWeight of a truncated tensor succeeded")
	}
	wt, err := b.UploadWeight(td)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Free()
	if err := b.MatMulNT(y, x, wt, 1); err == nil {
		t.Error("MatMulNT with a short a succeeded")
	}
	if err := b.Dequant(y, wt); err == nil {
		t.Error("Dequant into a short buffer succeeded")
	}
	short, _ := b.Alloc(3)
	if err := b.RoPE(x, 1, 1, 8, 0, short); err == nil {
		t.Error("RoPE with a short invFreq succeeded")
	}
	if err := b.RoPE(x, 2, 1, 8, 0, y); err == nil {
		t.Error("RoPE past the end succeeded")
	}
	short.Free()
	if err := b.Softcap(x, 9, 30); err == nil {
		t.Error("Softcap past the end succeeded")
	}
	if err := b.RowStats(x, 3, 3, 1, y, w); err == nil {
		t.Error("RowStats past the end succeeded")
	}
	if err := b.RowStats(x, 2, 4, 0, y, w); err == nil {
		t.Error("RowStats at temperature 0 succeeded")
	}
	if err := b.Copy(y, 4, x, 0, 5); err == nil {
		t.Error("Copy past the end succeeded")
	}
	if err := b.Copy(x, 2, x, 0, 4); err == nil {
		t.Error("Copy onto an overlapping range of the same buffer succeeded")
	}
	q, k, v, out := mustBuf(t, b, 8, nil), mustBuf(t, b, 8, nil), mustBuf(t, b, 8, nil), mustBuf(t, b, 8, nil)
	if err := b.Attention(out, q, k, v, backend.AttentionShape{Rows: 1, Heads: 3, KVHeads: 2, HeadDim: 2, KeyEnd: 1}); err == nil {
		t.Error("Attention with Heads not a multiple of KVHeads succeeded")
	}
	if err := b.Attention(out, q, k, v, backend.AttentionShape{Rows: 1, Heads: 2, KVHeads: 1, HeadDim: 2, KeyEnd: 5}); err == nil {
		t.Error("Attention with keys past the end of k succeeded")
	}
	{
		const e, h, f = 2, 32, 16
		enc := func(rows, k int) backend.Weight {
			td, err := Encode(codecs.Raw, codecs.BF16, rows, k, make([]float32, rows*k))
			if err != nil {
				t.Fatal(err)
			}
			w, err := b.UploadWeight(td)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Free() })
			return w
		}
		mw := backend.MoEWeights{
			Router: enc(e, h), RouterScale: mustBuf(t, b, h, nil), PerExpertScale: mustBuf(t, b, e, nil),
			RouterRoot: 1, Eps: 1e-6, GateUp: enc(e*2*f, h), Down: enc(e*h, f), TopK: e + 1,
		}
		mo, mu, mx := mustBuf(t, b, h, nil), mustBuf(t, b, h, nil), mustBuf(t, b, h, nil)
		if err := b.MoE(mo, mu, mx, 1, mw); err == nil {
			t.Error("MoE with TopK > E succeeded")
		}
		mw.TopK = 1
		if err := b.MoE(mo, mu, mx, 2, mw); err == nil {
			t.Error("MoE past the end of u succeeded")
		}
	}
	if err := b.Categorical(y, x, 1, 8, []float64{1}); err == nil {
		t.Error("Categorical with u = 1 succeeded")
	}
	if err := b.Categorical(y, x, 2, 4, []float64{0.5}); err == nil {
		t.Error("Categorical with fewer uniforms than rows succeeded")
	}
	ids := mustBuf(t, b, 2, []float32{0, 1})
	emb := mustBuf(t, b, 3*32, nil)
	if err := b.Embed(emb, wt, ids, 3, 1); err == nil {
		t.Error("Embed with too few ids succeeded")
	}
	if err := b.Embed(y, wt, ids, 2, 1); err == nil {
		t.Error("Embed past the end of out succeeded")
	}
	if err := b.SoftEmbed(emb, x, 5, wt, 1); err == nil {
		t.Error("SoftEmbed past the end of logits succeeded")
	}
	if err := b.AddScale(x, w, 3, 1); err == nil {
		t.Error("AddScale past the end of y succeeded")
	}
	if err := b.GeluMul(x, y, 9); err == nil {
		t.Error("GeluMul past the end succeeded")
	}
	if err := b.Temper(x, 8, 0); err == nil {
		t.Error("Temper at temperature 0 succeeded")
	}
	if err := b.RoundBF16(x, 9); err == nil {
		t.Error("RoundBF16 past the end succeeded")
	}
	if b.Name() != "cpu" {
		other := cpu.New(0)
		ob, _ := other.Alloc(64)
		if err := b.RMSNorm(y, ob, nil, 1, 8, 1e-6); err == nil {
			t.Error("RMSNorm of another backend's buffer succeeded")
		}
	}
}

func testRoPE(t T, b, ref backend.Backend, tol Tolerances) {
	rng := rand.New(rand.NewPCG(7, 8))
	ropes := []layout.RopeParams{
		{Type: "default", Theta: 10000, PartialRotaryFactor: 1},
		{Type: "proportional", Theta: 1e6, PartialRotaryFactor: 0.25},
	}
	for _, hd := range []int{32, 64, 256, 512} {
		for _, rp := range ropes {
			inv, err := model.RoPEInvFreq(rp, hd)
			if err != nil {
				t.Fatal(err)
			}
			rows, heads := 9, 3
			x := randVec(rng, rows*heads*hd)
			for i := range x {
				x[i] *= float32(math.Exp(rng.NormFloat64()))
			}
			name := fmt.Sprintf("%s/hd=%d", rp.Type, hd)
			for _, pos0 := range []int{0, 4093, 99995, rng.IntN(1 << 20)} {
				run := func(be backend.Backend) []float32 {
					xb := mustBuf(t, be, len(x)+3, x)
					ib := mustBuf(t, be, len(inv), inv)
					if err := be.RoPE(xb, rows, heads, hd, pos0, ib); err != nil {
						t.Fatalf("%s: %s RoPE: %v", name, be.Name(), err)
					}
					out := download(t, be, xb, len(x))
					xb.Free()
					ib.Free()
					return out
				}
				want, got := run(ref), run(b)
				var worst float64
				for h := 0; h < rows*heads; h++ {
					var mx float64
					for _, v := range x[h*hd : (h+1)*hd] {
						mx = max(mx, math.Abs(float64(v)))
					}
					for i := h * hd; i < (h+1)*hd; i++ {
						e := math.Abs(float64(got[i]) - float64(want[i]))
						worst = max(worst, e/mx)
						if !(e <= (RoPEAbs+tol.RoPE)*mx+tol.SubnormalAbs) {
							t.Fatalf("%s: row %d head %d [%d] = %g, want %g (error %.3g, max|x| %.3g)", name, h/heads, h%heads, i%hd, got[i], want[i], e, mx)
						}
					}
				}
				t.Logf("%s/pos0=%d: max error/max|x| %.3g", name, pos0, worst)
			}
		}
	}
}

func testSoftcap(t T, b, ref backend.Backend, tol Tolerances) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 7, 1000, 262144} {
		x := randVec(rng, n)
		for i := range x {
			x[i] *= float32(math.Exp(rng.NormFloat64() * 3))
		}
		x[0] = 0
		if n > 4 {
			x[1], x[2], x[3] = 1e-30, -500, float32(math.Inf(1))
		}
		run := func(be backend.Backend) []float32 {
			xb := mustBuf(t, be, n+2, append(x, 5, 6))
			if err := be.Softcap(xb, n, 30); err != nil {
				t.Fatalf("n=%d: %s Softcap: %v", n, be.Name(), err)
			}
			out := download(t, be, xb, n+2)
			xb.Free()
			return out
		}
		want, got := run(ref), run(b)
		if got[n] != 5 || got[n+1] != 6 {
			t.Errorf("n=%d: Softcap wrote past n: %v", n, got[n:])
		}
		// A subnormal z/cap may be flushed: cap·2⁻¹²⁶ more.
		var worst float64
		for i := range n {
			e := math.Abs(float64(got[i]) - float64(want[i]))
			bound := tol.Softcap*math.Abs(float64(want[i])) + 30*tol.SubnormalAbs
			worst = max(worst, e/math.Max(math.Abs(float64(want[i])), 1e-38))
			if !(e <= bound) {
				t.Fatalf("n=%d: softcap(%g) = %g, want %g (error %.3g, bound %.3g)", n, x[i], got[i], want[i], e, bound)
			}
		}
		t.Logf("n=%d: max relative error %.3g (bound %.3g)", n, worst, tol.Softcap)
	}
}

func testRowStats(t T, b, ref backend.Backend, o Options, tol Tolerances) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {16, 512}, {5, 1000}, {3, 262144}} {
		rows, v := sh[0], sh[1]
		if o.skip(v > 1<<16) {
			continue
		}
		for _, temp := range []float32{1, 0.7, 2.5} {
			name := fmt.Sprintf("%dx%d/T=%g", rows, v, temp)
			z := randVec(rng, rows*v)
			for r := range rows {
				row := z[r*v : (r+1)*v]
				scale := float32([]float64{0.1, 1, 4, 12}[r%4])
				for i := range row {
					row[i] = 30 * float32(math.Tanh(float64(row[i]*scale/30)))
				}
				if v >= 512 && r%2 == 1 { // a peaked row and a -inf entry
					row[rng.IntN(v)] = 29.5
					row[rng.IntN(v)] = float32(math.Inf(-1))
				}
				if v >= 512 && r%5 == 2 { // an exact tie: the first index wins
					i, j := rng.IntN(v/2), v/2+rng.IntN(v/2)
					row[i], row[j] = 31, 31
				}
			}
			run := func(be backend.Backend) ([]float32, []float32) {
				lb := mustBuf(t, be, len(z), z)
				eb := mustBuf(t, be, rows+1, nil)
				ab := mustBuf(t, be, rows+1, nil)
				if err := be.RowStats(lb, rows, v, temp, eb, ab); err != nil {
					t.Fatalf("%s: %s RowStats: %v", name, be.Name(), err)
				}
				e, a := download(t, be, eb, rows), download(t, be, ab, rows)
				lb.Free()
				eb.Free()
				ab.Free()
				return e, a
			}
			we, wa := run(ref)
			ge, ga := run(b)
			var worst float64
			for r := range rows {
				e := math.Abs(float64(ge[r]) - float64(we[r]))
				worst = max(worst, e)
				spread, logS := entropySensitivity(z[r*v:(r+1)*v], temp)
				bound := EntropyAbs + tol.EntropyExp*(1+spread) + tol.EntropyLog*logS
				if !(e <= bound) {
					t.Fatalf("%s: row %d: entropy %g, want %g (error %.3g, bound %.3g)", name, r, ge[r], we[r], e, bound)
				}
				if ga[r] != wa[r] {
					row := z[r*v : (r+1)*v]
					top := row[int(wa[r])] / temp
					var second float32 = float32(math.Inf(-1))
					for i, x := range row {
						if i != int(wa[r]) {
							second = max(second, x/temp)
						}
					}
					if top-second >= ArgmaxGap {
						t.Fatalf("%s: row %d: argmax %g, want %g", name, r, ga[r], wa[r])
					}
				}
			}
			t.Logf("%s: max entropy error %.3g nats", name, worst)
		}
	}
}
