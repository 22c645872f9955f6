package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	checks "github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/session"
)

// fixtureEngine quantizes a fixture (the embedded tiny checkpoint, or one of
// the module's testdata/) with a profile and binds it; it returns the model,
// an engine on the GPU at precision p, and the reference directory.
func fixtureEngine(t *testing.T, fixture, profile string, p Precision) (*model.Model, *model.Engine, string) {
	t.Helper()
	d, _ := device(t)
	tmp := t.TempDir()
	src, ref := filepath.Join(tmp, "snap"), filepath.Join(tmp, "ref")
	if fixture == "tiny" {
		if _, err := testmodel.WriteSnapshot(src); err != nil {
			t.Fatal(err)
		}
		if err := testmodel.WriteReference(ref); err != nil {
			t.Fatal(err)
		}
	} else {
		ref = filepath.Join("..", "testdata", fixture)
		snaps, err := filepath.Glob(filepath.Join(ref, "hub", "models--*", "snapshots", "*"))
		if err != nil || len(snaps) != 1 {
			t.Fatalf("fixture %s: snapshot not found (%v)", fixture, err)
		}
		src = snaps[0]
	}
	out := filepath.Join(tmp, "pack")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: out, Profile: profile}); err != nil {
		t.Fatal(err)
	}
	pk, err := dgq.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pk.Close() })
	m, err := model.Bind(model.PackWeights(pk))
	if err != nil {
		t.Fatal(err)
	}
	b := mustBackend(t, d, Options{Precision: p})
	e, err := model.NewEngine(m, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, e, ref
}

// cpuEngine runs m on a CPU backend for the test.
func cpuEngine(t *testing.T, m *model.Model) *model.Engine {
	t.Helper()
	e, err := model.NewEngine(m, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// The transformers reference scenarios on the GPU: in f32 every tensor
// within the documented bounds and every float tensor within Bounds.VsCPU
// of the CPU runtime. The bf16 precision is judged against transformers'
// own bfloat16 results (Bounds.BF16), which only the trained checkpoint's
// reference carries: there it must pass; on the random fixtures parity
// must refuse the verdict.
func TestEngineParity(t *testing.T) {
	cases := []struct {
		fixture, profile string
		p                Precision
	}{
		{"tiny", "bf16", PrecisionF32}, {"wide", "bf16", PrecisionF32}, {"tiny-distinct", "bf16", PrecisionF32},
		{"tiny", "q4", PrecisionF32}, {"tiny", "nvfp4", PrecisionF32}, {"wide", "q4", PrecisionF32},
		{"tiny", "bf16", PrecisionBF16}, {"wide", "q4", PrecisionBF16},
		{"trained", "bf16", PrecisionF32}, {"trained", "q4", PrecisionF32}, {"trained", "bf16", PrecisionBF16},
	}
	for _, tc := range cases {
		t.Run(tc.fixture+"/"+tc.profile+"/"+tc.p.String(), func(t *testing.T) {
			_, e, ref := fixtureEngine(t, tc.fixture, tc.profile, tc.p)
			b := checks.DefaultBounds()
			if tc.p == PrecisionBF16 {
				b.VsCPU, b.BF16 = checks.VsCPUBF16, true
			}
			r, err := checks.Parity(t.Context(), e, ref, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cases {
				t.Logf("%-24s max abs %.3g (bound %.3g, transformers' own %.3g) vs cpu %.3g argmax %.3f pass %v", c.Name, c.MaxAbsErr, c.Tolerance, c.RefErr, c.VsCPU, c.ArgmaxAgree, c.Pass)
			}
			// Judged: a bf16 pack (the reference's own weights), in bf16
			// precision only where the reference has transformers' bf16
			// results (testdata/trained's, and the embedded tiny one's since
			// 2026-12-02).
			judged := tc.profile == "bf16" && (tc.p == PrecisionF32 || tc.fixture == "trained" || tc.fixture == "tiny")
			// Without the reference's verdict f32 is still judged against the CPU
			// backend; bf16 precision has none then (pass is no verdict's).
			verdict := judged || tc.p == PrecisionF32
			if r.Verdict != verdict || verdict && !r.Pass || r.Judged != judged {
				t.Errorf("parity verdict %v pass %v judged %v (want %v, %v: %s; bounds %+v)", r.Verdict, r.Pass, r.Judged, verdict, judged, r.NoVerdict, b)
			}
		})
	}
}

// Generation on the GPU against the CPU runtime at a fixed seed. Whole
// generations are not token-for-token equal on these random-weight
// fixtures: self-conditioning feeds each step's logits into the next and
// amplifies the f32-vs-float64 difference (7e-4 at step 1) ~10–40× per step
// (measured on the H200, docs/cuda.md), so two runs part within a few steps.
// What must hold is that every step computes the same thing: in lockstep
// (checks.GenerateLockstep: the CPU given the GPU's canvas and
// self-conditioning input each step) every difference is explained under
// f32 arithmetic's tolerances (checks.LockstepF32): routing flips at CPU
// margins within 1e-4, logits of undisturbed positions within 2e-2, every
// flipped decision within its row's logit difference.
func TestEngineGenerateMatchesCPU(t *testing.T) {
	for _, fx := range []string{"tiny", "wide", "trained"} {
		t.Run(fx, func(t *testing.T) {
			m, e, _ := fixtureEngine(t, fx, "bf16", PrecisionF32)
			ce := cpuEngine(t, m)
			prompt := []int{2, 17, 33, 5, 90, 41, 7, 64, 12, 3, 99, 100, 101, 8}
			equal := 0
			opts := []generate.Options{
				{Seed: 1, MaxNewTokens: 48},
				{Seed: 2},
				{Seed: 5},
				{Seed: 7, MaxNewTokens: 40, MaxSteps: 6, FirstStepSC: true},
				{Seed: 3, MaxNewTokens: 16, ArgmaxAccept: true, PlateauStop: true, EmptyReplyReroll: true},
				// Short blocks: one or two steps, so self-conditioning has no
				// chain to amplify along.
				{Seed: 11, MaxNewTokens: 64, MaxSteps: 1},
				{Seed: 12, MaxNewTokens: 64, MaxSteps: 1},
				{Seed: 13, MaxNewTokens: 64, MaxSteps: 2},
				{Seed: 14, MaxNewTokens: 64, MaxSteps: 2, ArgmaxAccept: true},
			}
			for _, o := range opts {
				want, err := generate.Generate(context.Background(), ce, prompt, nil, o)
				if err != nil {
					t.Fatal(err)
				}
				got, err := generate.Generate(context.Background(), e, prompt, nil, o)
				if err != nil {
					t.Fatal(err)
				}
				r, err := checks.GenerateLockstep(context.Background(), e, prompt, nil, o, checks.LockstepF32())
				if err != nil {
					t.Fatal(err)
				}
				same := slices.Equal(got.Tokens, want.Tokens) && got.Steps == want.Steps && got.StopReason == want.StopReason
				if same {
					equal++
				}
				t.Logf("seed %d: tokens equal %v (gpu %d steps %s, cpu %d steps %s); lockstep %s",
					o.Seed, same, got.Steps, got.StopReason, want.Steps, want.StopReason, lockstepLine(r))
				if !slices.Equal(r.Generation.Tokens, got.Tokens) {
					t.Errorf("seed %d: the lockstep run generated other tokens than Generate", o.Seed)
				}
				if !r.RoutesCompared || r.Unexplained() > 0 {
					t.Errorf("seed %d: differences beyond f32 noise", o.Seed)
				}
			}
			t.Logf("%d of %d generations token-for-token equal", equal, len(opts))
		})
	}
}

// bf16 precision where it is used: a synthetic checkpoint with the real
// shapes (2 layers, q4 experts) through the engine in both precisions — a
// prefill and a denoising step without and with self-conditioning — with
// the bf16 logits compared to the f32 ones (validated against the CPU by
// TestEngineParity).
func TestEngineBF16RealShape(t *testing.T) {
	d, _ := device(t)
	if testing.Short() {
		t.Skip("-short: synthesizes 4.8 GB")
	}
	tmp := t.TempDir()
	src, out := filepath.Join(tmp, "snap"), filepath.Join(tmp, "pack")
	if _, err := dgq.Synthesize(context.Background(), dgq.SynthOptions{Out: src, Layers: 2, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: out, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(src)
	pk, err := dgq.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer pk.Close()
	m, err := model.Bind(model.PackWeights(pk))
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config().Text.VocabSize
	prompt, canvas := make([]int, 256), make([]int, 256)
	for i := range prompt {
		prompt[i] = 3 + (i*7919+13)%(V-3)
		canvas[i] = 3 + (i*104729+5)%(V-3)
	}
	run := func(p Precision) [2][]float32 {
		b := mustBackend(t, d, Options{Precision: p})
		defer b.Close()
		e, err := model.NewEngine(m, b)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		c := e.NewCache()
		defer c.Free()
		if err := e.Prefill(t.Context(), c, prompt, nil); err != nil {
			t.Fatal(err)
		}
		l1, err := e.Denoise(t.Context(), c, canvas, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc := make([]float32, len(l1))
		for i, z := range l1 {
			sc[i] = z / 0.8
		}
		l2, err := e.Denoise(t.Context(), c, canvas, sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		return [2][]float32{l1, l2}
	}
	f32, bf16 := run(PrecisionF32), run(PrecisionBF16)
	for s := range 2 {
		a, b := bf16[s], f32[s]
		var maxErr, maxRef, se, sr float64
		agree := 0
		for r := range len(a) / V {
			ra, rb := a[r*V:(r+1)*V], b[r*V:(r+1)*V]
			if cpu.Argmax(ra) == cpu.Argmax(rb) {
				agree++
			}
			for i := range ra {
				e := float64(ra[i]) - float64(rb[i])
				maxErr, maxRef = max(maxErr, math.Abs(e)), max(maxRef, math.Abs(float64(rb[i])))
				se, sr = se+e*e, sr+float64(rb[i])*float64(rb[i])
			}
		}
		rel := math.Sqrt(se / sr)
		t.Logf("step %d: bf16 vs f32 logits: max abs %.3g (max |logit| %.3g), relative RMS %.3g, argmax agreement %d/%d", s+1, maxErr, maxRef, rel, agree, len(a)/V)
		if !(rel < 0.1) {
			t.Errorf("step %d: bf16 logits %.3g RMS away from f32", s+1, rel)
		}
	}
}

// lockstepLine is a lockstep report in one line, then its first steps.
func lockstepLine(r *checks.LockstepReport) string {
	s := fmt.Sprintf("%d steps, %d positions: rerouted %d, disturbed %d (cause flips %d, largest CPU margin %.3g); undisturbed max |Δ logit| %.3g, |Δ entropy| %.3g; flips argmax %d draw %d mask %d; unexplained routes %d rows %d argmax %d draw %d mask %d",
		r.Steps, r.Positions, r.Rerouted, r.Disturbed, r.CauseFlips, r.RerouteMargin, r.MaxLogitDiff, r.MaxEntropyDiff,
		r.Argmax, r.Draw, r.Mask, r.UnexplainedRoutes, r.UnexplainedRows, r.UnexplainedArgmax, r.UnexplainedDraw, r.UnexplainedMask)
	for k, st := range r.PerStep[:min(4, len(r.PerStep))] {
		s += fmt.Sprintf("\n  step %d: max |Δ tempered logit| %.3g, max |Δ entropy| %.3g, flips %d, rerouted %d, CPU router margin %.3g",
			k+1, st.LogitDiff, st.EntropyDiff, st.Flips, st.Rerouted, st.RouterGap)
	}
	return s
}

// bf16Lockstep derives the lockstep tolerances of the bf16 precision from
// transformers in bfloat16 on the trained checkpoint (check.LockstepBF16 of
// the pack's bf16 parity against testdata/trained's reference).
func bf16Lockstep(t *testing.T, e *model.Engine) checks.LockstepTol {
	t.Helper()
	ref := filepath.Join("..", "testdata", "trained")
	b := checks.DefaultBounds()
	b.VsCPU, b.BF16 = checks.VsCPUBF16, true
	r, err := checks.Parity(t.Context(), e, ref, b)
	if err != nil {
		t.Fatal(err)
	}
	tol, err := checks.LockstepBF16(r, ref)
	if err != nil {
		t.Fatalf("the trained reference lacks transformers' bf16 results: %v", err)
	}
	return tol
}

// Seeded generations on the trained checkpoint at the default schedule, the
// GPU in bf16 precision against the CPU (issue 13, item 6): every
// difference must be explained by the bf16 precision's own tolerances,
// derived from transformers in bfloat16 on the same checkpoint
// (bf16Lockstep): tempered logits of positions routed alike within the
// parity bound of sc2_logits, routing flips at CPU margins within twice
// the largest margin at which transformers' bf16 routed otherwise than its
// float64.
func TestEngineGenerateTrainedBF16(t *testing.T) {
	m, e, _ := fixtureEngine(t, "trained", "bf16", PrecisionBF16)
	ce := cpuEngine(t, m)
	tol := bf16Lockstep(t, e)
	t.Logf("bf16 lockstep tolerances: logits %.3g, router margin %.3g", tol.Logit, tol.Router)
	prompt := []int{2, 17, 33, 5, 90, 41, 7, 64, 12, 3, 99, 100, 101, 8}
	equal := 0
	const runs = 4
	for seed := uint64(1); seed <= runs; seed++ {
		o := generate.Options{Seed: seed}
		want, err := generate.Generate(context.Background(), ce, prompt, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := checks.GenerateLockstep(context.Background(), e, prompt, nil, o, tol)
		if err != nil {
			t.Fatal(err)
		}
		got := r.Generation
		same := slices.Equal(got.Tokens, want.Tokens)
		if same {
			equal++
		}
		t.Logf("seed %d: tokens equal %v (gpu %d steps, cpu %d); lockstep %s", seed, same, got.Steps, want.Steps, lockstepLine(r))
		if math.IsNaN(r.MaxEntropyDiff) || !r.RoutesCompared || r.Unexplained() > 0 {
			t.Errorf("seed %d: differences the bf16 tolerances do not explain", seed)
		}
	}
	t.Logf("bf16: %d of %d generations token-for-token equal to the CPU's", equal, runs)
}

// dgq verify on the GPU: the trained checkpoint's q4 pack against its bf16
// pack, both on CUDA, measures what the same comparison on the CPU does
// (the two backends differ by f32 rounding, far below a q4 pack's damage).
func TestVerifyOnCUDA(t *testing.T) {
	device(t) // skips without a GPU
	snaps, err := filepath.Glob(filepath.Join("..", "testdata", "trained", "hub", "models--*", "snapshots", "*"))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("trained snapshot not found (%v)", err)
	}
	dir := t.TempDir()
	for _, p := range []string{"bf16", "q4"} {
		if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: snaps[0], Out: filepath.Join(dir, p), Profile: p}); err != nil {
			t.Fatal(err)
		}
	}
	text := filepath.Join("..", "testdata", "trained", "heldout.txt")
	var reps [2]*checks.VerifyReport
	for i, be := range []string{"cpu", "cuda"} {
		r, err := checks.Verify(context.Background(), filepath.Join(dir, "q4"), checks.VerifyOptions{
			Source: filepath.Join(dir, "bf16"), Text: text, Windows: 4, Prefix: checks.VerifyPrefix, Generations: -1,
			Load: session.Options{Backend: be}})
		if err != nil {
			t.Fatalf("%s: %v", be, err)
		}
		reps[i] = r
		t.Logf("%s: KLD mean %.4g p99 %.4g max %.4g, top-1 %.4f, accuracy source %.4f pack %.4f, %d positions, %d non-finite",
			be, r.KLD.Mean, r.KLD.P99, r.KLD.Max, r.Top1, r.Accuracy.Source, r.Accuracy.Pack, r.Positions, r.NonFinite)
	}
	c, g := reps[0], reps[1]
	if g.NonFinite > 0 || g.Positions != c.Positions || math.Abs(g.Top1-c.Top1) > 0.02 ||
		!(g.KLD.Mean > c.KLD.Mean/2 && g.KLD.Mean < 2*c.KLD.Mean) {
		t.Errorf("cuda verify %+v\nvs cpu %+v", g.KLD, c.KLD)
	}
}
