package check

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
)

// In lockstep with itself (an Engine on the CPU backend against another),
// every step agrees exactly: nothing to explain.
func TestGenerateLockstepCPU(t *testing.T) {
	e := loadEngine(t, "tiny", "bf16")
	r, err := GenerateLockstep(context.Background(), e, []int{2, 17, 33, 5, 90, 41}, nil, generate.Options{Seed: 4, MaxNewTokens: 32}, LockstepF32())
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps == 0 || r.Positions != r.Steps*e.Model().Config().CanvasLength || r.MaxEntropyDiff != 0 || r.Argmax+r.Draw+r.Mask != 0 ||
		!r.RoutesCompared || r.Rerouted != 0 || r.Unexplained() != 0 {
		t.Fatalf("lockstep report %+v", r)
	}
	for k, st := range r.PerStep {
		if !(st.RouterGap >= 0 && st.RouterGap < 1) || st.LogitDiff != 0 {
			t.Fatalf("step %d: %+v", k+1, st)
		}
	}
}

func TestLockstepMargins(t *testing.T) {
	// Sorted 0.01, 0.05, 0.07, 0.5: prefix sums before each 0, 0.01, 0.06,
	// 0.13; with bound 0.1 the first three are accepted, and the margins are
	// |0.06 − 0.1| = 0.04, the accepted/rejected gap 0.5 − 0.07 = 0.43, and
	// |0.13 − 0.1| = 0.03.
	if got := lockstepMaskMargin([]float32{0.5, 0.05, 0.01, 0.07}, 0.1); math.Abs(got-0.03) > 1e-6 {
		t.Errorf("mask margin %g, want 0.03", got)
	}
	// Two equal logits: the boundary between them sits at mass 0.5.
	if got := lockstepMassGap([]float32{0, 0}, 0.4999, 0, 1); math.Abs(got-1e-4) > 1e-9 {
		t.Errorf("mass gap %g, want 1e-4", got)
	}
}

// The classification of one step's differences: each case is one canvas
// position (V = 4) with the CPU's tempered logits z, the engine's zd, and
// the two sides' decisions.
func TestLockstepCompare(t *testing.T) {
	base := []float32{1, 0.99, -1, -2}
	shift := func(d ...float32) []float32 {
		out := slices.Clone(base)
		for i, v := range d {
			out[i] += v
		}
		return out
	}
	for _, tc := range []struct {
		name              string
		zd                []float32
		rerouted          bool
		argmax, cpuArgmax int
		draw, cpuDraw     int
		u                 float64
		want              LockstepReport // the counters compared
	}{
		{name: "identical", zd: base},
		// δ = 0.006: the CPU's gap 0.01 ≤ 2δ, so the flip fits the row.
		{name: "argmax flip within its row", zd: shift(-0.006, 0.006), argmax: 1, want: LockstepReport{Argmax: 1}},
		// δ = 0.001 cannot move a gap of 0.01: a sampler inconsistency.
		{name: "argmax flip beyond its row", zd: shift(-0.001), argmax: 1,
			want: LockstepReport{Argmax: 1, UnexplainedArgmax: 1}},
		// δ = 0.1 > LockstepF32().Logit on a position routed alike.
		{name: "row beyond the logit bound", zd: shift(0.1), want: LockstepReport{UnexplainedRows: 1}},
		{name: "rerouted row", zd: shift(0.1), rerouted: true, argmax: 1,
			want: LockstepReport{Rerouted: 1, Argmax: 1}},
		// Boundary between 0 and 1 at mass p0 = softmax(base)[0]; u just
		// above it: a δ of 0.01 moves the boundary past u.
		{name: "draw flip within its row", zd: shift(0.01), draw: 0, cpuDraw: 1, u: 0.461,
			want: LockstepReport{Draw: 1}},
		{name: "draw flip beyond its row", zd: shift(0.0001), draw: 0, cpuDraw: 1, u: 0.47,
			want: LockstepReport{Draw: 1, UnexplainedDraw: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &lockstepStepper{V: 4, gc: generate.DefaultConfig(), tol: LockstepF32()}
			ent := []float32{1}
			out := model.StepStats{Entropy: ent, Argmax: []int{tc.argmax}, Draw: []int{tc.draw}}
			outC := model.StepStats{Entropy: ent, Argmax: []int{tc.cpuArgmax}, Draw: []int{tc.cpuDraw}}
			s.compare(base, tc.zd, 1, []bool{tc.rerouted}, tc.rerouted, []float64{1}, []float64{tc.u}, out, outC)
			r, w := s.rep, tc.want
			got := [7]int{r.Rerouted, r.UnexplainedRows, r.Argmax, r.UnexplainedArgmax, r.Draw, r.UnexplainedDraw, r.Mask}
			want := [7]int{w.Rerouted, w.UnexplainedRows, w.Argmax, w.UnexplainedArgmax, w.Draw, w.UnexplainedDraw, w.Mask}
			if got != want {
				t.Errorf("rerouted, rows, argmax, argmax unexplained, draw, draw unexplained, mask = %v, want %v", got, want)
			}
		})
	}
}

// LockstepBF16 takes the logits bound from a bf16 verdict and twice
// transformers' largest bf16 cause margin from the reference; without a
// bf16 verdict, or a reference without those results, there are no
// tolerances.
func TestLockstepBF16(t *testing.T) {
	ref := t.TempDir()
	if err := testmodel.WriteReference(ref); err != nil {
		t.Fatal(err)
	}
	judged := &ParityReport{Judged: true, Anchor: "bf16", Cases: []ParityCase{
		{Name: "logits1", Tolerance: 30}, {Name: "logits3", Tolerance: 41}, {Name: "prefill_last_hidden", Tolerance: 99},
		{Name: "logits2", Tolerance: math.Inf(1)}}}
	tol, err := LockstepBF16(judged, ref)
	if err != nil {
		t.Fatal(err)
	}
	if tol.Logit != 41 || math.Abs(tol.Router-F64Multiple*0.023119477726756876) > 1e-12 {
		t.Errorf("tolerances %+v", tol)
	}
	for _, r := range []*ParityReport{
		{Judged: false, NoVerdict: "other weights"},
		{Judged: true, Anchor: "f64", Cases: judged.Cases},
		{Judged: true, Anchor: "bf16"}, // no logits bound
	} {
		if _, err := LockstepBF16(r, ref); !errors.Is(err, ErrNoVerdict) {
			t.Errorf("LockstepBF16(%+v) = %v, want ErrNoVerdict", r, err)
		}
	}
	trained := filepath.Join("..", "..", "testdata", "trained")
	if _, err := LockstepBF16(judged, trained); err != nil {
		t.Errorf("the trained reference: %v", err)
	}
}
