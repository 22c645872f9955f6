package runtime

import (
	"context"
	"math"
	"slices"
	"testing"
)

// An Engine on the CPU backend computes what Model computes: the backend's
// ops are Model's own code, so every output of the reference scenario
// (chunked prefill across the sliding window, hidden states, a
// self-conditioned step, a second prefill) is bit-identical, for every
// fixture geometry and for quantized packs.
func TestEngineCPUMatchesModel(t *testing.T) {
	cases := []struct{ fixture, profile string }{
		{"tiny", "bf16"}, {"tiny", "q4"}, {"wide", "bf16"}, {"tiny-distinct", "bf16"}, {"tiny", "nvfp4"},
	}
	for _, tc := range cases {
		t.Run(tc.fixture+"/"+tc.profile, func(t *testing.T) {
			m := loadModel(t, tc.fixture, tc.profile)
			ids := refIDs(t, m, tc.fixture)
			want := scenario(t, m, ids, []int{3, 7})
			e, err := NewEngine(m, CPUBackend())
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			got := scenarioOn(t, e.sequence(), ids, []int{3, 7})
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for i := range want {
				if d := maxAbsDiff32(got[i], want[i]); d != 0 {
					t.Errorf("output %d (of %d values): max |engine − model| = %g", i, len(want[i]), d)
				}
			}
		})
	}
}

// Generation on an Engine (CPU backend) gives Model's tokens, steps and
// stop reason for the same seed and options, including the divergences
// that self-condition the first step and reroll empty replies.
func TestEngineGenerateMatchesModel(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	e, err := NewEngine(m, CPUBackend())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt := []int{2, 17, 33, 5, 90, 41, 7, 64, 12, 3, 99}
	for _, o := range []GenerateOptions{
		{Seed: 1, MaxNewTokens: 24},
		{Seed: 7, MaxNewTokens: 40, MaxSteps: 6, FirstStepSC: true},
		{Seed: 3, MaxNewTokens: 16, ArgmaxAccept: true, PlateauStop: true, EmptyReplyReroll: true},
	} {
		want, err := m.Generate(context.Background(), prompt, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Generate(context.Background(), prompt, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Tokens, want.Tokens) || got.Steps != want.Steps || got.Blocks != want.Blocks || got.StopReason != want.StopReason {
			t.Errorf("seed %d: engine %v (%d steps, %s), model %v (%d steps, %s)", o.Seed, got.Tokens, got.Steps, got.StopReason, want.Tokens, want.Steps, want.StopReason)
		}
		if want.Steps < 2 {
			t.Errorf("seed %d: only %d steps: the case exercises nothing", o.Seed, want.Steps)
		}
	}
}

// In lockstep with itself (an Engine on the CPU backend against Model),
// every step agrees exactly: nothing to explain.
func TestGenerateLockstepCPU(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	e, err := NewEngine(m, CPUBackend())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.GenerateLockstep(context.Background(), []int{2, 17, 33, 5, 90, 41}, nil, GenerateOptions{Seed: 4, MaxNewTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps == 0 || r.Positions != r.Steps*m.cfg.CanvasLength || r.MaxEntropyDiff != 0 || r.Argmax+r.Draw+r.Mask != 0 {
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

// A ProfiledBackend times every op while started and changes no result.
func TestProfiledBackend(t *testing.T) {
	m := loadModel(t, "tiny", "q4")
	p := NewProfiledBackend(CPUBackend())
	e, err := NewEngine(m, p)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids := []int{2, 17, 33, 5, 90, 41}
	c := e.NewCache()
	p.Start()
	got := make([]float32, len(ids)*m.hidden)
	if err := e.Prefill(c, ids, got); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	want, err := m.Prefill(m.NewCache(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff32(got, want); d != 0 {
		t.Errorf("profiled prefill differs by %g", d)
	}
	calls := map[string]int{}
	for _, op := range p.Times() {
		calls[op.Op] = op.Calls
	}
	L := len(m.enc)
	if calls["MoE"] != L || calls["Attention"] != L || calls["Embed"] != 1 || calls["MatMulNT"] < 6*L {
		t.Errorf("op calls %v for %d layers", calls, L)
	}
}
