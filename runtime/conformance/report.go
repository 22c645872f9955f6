package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// maxReports is how many mismatches of one case are reported one by one.
const maxReports = 5

// report collects the comparisons of one case of an op: it reports the
// first maxReports mismatches with t.Errorf, each naming the op, the case,
// the place, the value, its reference and the bound, then their count, and
// logs the worst error relative to its bound.
type report struct {
	t      T
	op     string
	name   string
	at     func(i int) string // names index i; "[i]" when nil
	fails  int
	worst  float64 // largest error/bound
	checks int
	alts   int // values that matched exactOr's alternative, not the reference
}

func newReport(t T, op, name string) *report {
	return &report{t: t, op: op, name: name}
}

func (r *report) where(i int) string {
	if r.at != nil {
		return r.at(i)
	}
	return fmt.Sprintf("[%d]", i)
}

// errorf reports a mismatch.
func (r *report) errorf(format string, args ...any) {
	r.t.Helper()
	r.fails++
	if r.fails <= maxReports {
		r.t.Errorf("%s %s: %s", r.op, r.name, fmt.Sprintf(format, args...))
	}
}

// exact compares got with want bit for bit (NaN matching any NaN).
func (r *report) exact(i int, got, want float32) {
	r.checks++
	if !same(got, want) {
		r.t.Helper()
		r.errorf("%s = %g (%#08x), want %g (%#08x) bit-exact", r.where(i), got, math.Float32bits(got), want, math.Float32bits(want))
	}
}

// exactOr compares got with want bit for bit, and accepts alt as well (a
// second value the contract allows: the flushed-subnormal result; a NaN alt
// accepts nothing more, since same matches NaN to NaN only where want is one
// too).
func (r *report) exactOr(i int, got, want, alt float32) {
	if alt == alt && math.Float32bits(got) == math.Float32bits(alt) {
		r.checks++
		if !same(got, want) {
			r.alts++
		}
		return
	}
	r.exact(i, got, want)
}

// exactAll compares two slices bit for bit.
func (r *report) exactAll(got, want []float32) {
	if len(got) != len(want) {
		r.t.Helper()
		r.errorf("%d values, want %d", len(got), len(want))
		return
	}
	for i := range want {
		if !same(got[i], want[i]) {
			r.t.Helper()
		}
		r.exact(i, got[i], want[i])
	}
}

// within checks |got − want| ≤ bound (NaN against NaN passes; NaN against a
// number fails).
func (r *report) within(i int, got, want, bound float64) {
	r.checks++
	if math.IsNaN(got) && math.IsNaN(want) {
		return
	}
	e := math.Abs(got - want)
	if got == want { // equal infinities
		e = 0
	}
	if bound > 0 {
		r.worst = max(r.worst, e/bound)
	} else if e > 0 {
		r.worst = math.Inf(1)
	}
	if !(e <= bound) {
		r.t.Helper()
		r.errorf("%s = %.9g, want %.9g (error %.3g > bound %.3g)", r.where(i), got, want, e, bound)
	}
}

// done reports the count of mismatches past the first few and logs the
// worst error relative to the bound.
func (r *report) done() {
	r.t.Helper()
	if r.fails > maxReports {
		r.t.Errorf("%s %s: %d mismatches in all (%d reported)", r.op, r.name, r.fails, maxReports)
	}
	if r.worst > 0 {
		r.t.Logf("%s %s: worst error %.3g of the bound over %d values", r.op, r.name, r.worst, r.checks)
	}
	if r.alts > 0 {
		r.t.Logf("%s %s: %d of %d values are the flushed-subnormal result, not the reference's", r.op, r.name, r.alts, r.checks)
	}
}

// runOp uploads each of in to a buffer of its own length on be, runs op on
// those buffers and downloads them all (inputs as well as outputs, so an op
// that writes where it should not is seen).
func runOp(t T, be backend.Backend, what string, in [][]float32, op func(bufs []backend.Buf) error) [][]float32 {
	t.Helper()
	bufs := make([]backend.Buf, len(in))
	for i, v := range in {
		bufs[i] = mustBuf(t, be, len(v), v)
	}
	if err := op(bufs); err != nil {
		t.Fatalf("%s: %s: %v", be.Name(), what, err)
	}
	out := make([][]float32, len(in))
	for i, buf := range bufs {
		out[i] = download(t, be, buf, len(in[i]))
		buf.Free()
	}
	return out
}

// uploadWeight makes td resident on be.
func uploadWeight(t T, be backend.Backend, td backend.TensorData) backend.Weight {
	t.Helper()
	w, err := be.UploadWeight(td)
	if err != nil {
		t.Fatalf("%s: UploadWeight %s: %v", be.Name(), td.Name, err)
	}
	t.Cleanup(func() { w.Free() })
	return w
}

// mustEncode is Encode that fails the test on error.
func mustEncode(t T, f formatDType, rows, k int, src []float32) backend.TensorData {
	t.Helper()
	td, err := Encode(f.f, f.dt, rows, k, src)
	if err != nil {
		t.Fatalf("Encode %s %s %d×%d: %v", f.f, f.dt, rows, k, err)
	}
	return td
}

// dequantRef is the reference decoding of a weight ([Rows][K]).
func dequantRef(t T, ref backend.Backend, w backend.Weight) []float32 {
	t.Helper()
	n := w.Rows() * w.Cols()
	ob := mustBuf(t, ref, n, nil)
	if err := ref.Dequant(ob, w); err != nil {
		t.Fatalf("cpu Dequant: %v", err)
	}
	out := download(t, ref, ob, n)
	ob.Free()
	return out
}

// specials are values every elementwise op sees: signed zeros, denormals,
// the extremes, infinities and a NaN.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.5, -2.75,
	math.Float32frombits(1), math.Float32frombits(0x807fffff), math.Float32frombits(0x00800000),
	math.MaxFloat32, -math.MaxFloat32, 1e-30, -3e-39, 65504, 3.0e38,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
}

// spreadVec is randVec with magnitudes spread over e^(±3·spread).
func spreadVec(rng *rand.Rand, n int, spread float64) []float32 {
	v := randVec(rng, n)
	for i := range v {
		v[i] *= float32(math.Exp(rng.NormFloat64() * spread))
	}
	return v
}

// sentinel fills a buffer's tail past the op's values, to see it is left
// alone.
func withTail(v []float32, tail int) []float32 {
	out := make([]float32, len(v)+tail)
	copy(out, v)
	for i := len(v); i < len(out); i++ {
		out[i] = float32(i%7) - 3.25
	}
	return out
}
