package runtime

import (
	"context"
	"slices"
	"testing"
)

// engineScenario is scenario (model_test.go) run by an Engine.
func engineScenario(t *testing.T, e *Engine, ids map[string][]int, chunks []int) [][]float32 {
	t.Helper()
	c := e.NewCache()
	defer c.Free()
	H := e.m.hidden
	var out [][]float32
	prompt := ids["prompt_ids"]
	var hidden []float32
	start := 0
	for _, n := range append(chunks, len(prompt)) {
		if n <= start {
			continue
		}
		h := make([]float32, (n-start)*H)
		if err := e.Prefill(c, prompt[start:n], h); err != nil {
			t.Fatal(err)
		}
		hidden = append(hidden, h...)
		start = n
	}
	out = append(out, hidden)
	var hs [][]float32
	l1, err := e.Denoise(c, ids["canvas1_ids"], nil, &hs)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, l1)
	out = append(out, hs...)
	sc := make([]float32, len(l1))
	for i, z := range l1 {
		sc[i] = z / 0.8
	}
	l2, err := e.Denoise(c, ids["canvas2_ids"], sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := make([]float32, len(ids["block1_ids"])*H)
	if err := e.Prefill(c, ids["block1_ids"], b1); err != nil {
		t.Fatal(err)
	}
	l3, err := e.Denoise(c, ids["canvas3_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, l2, b1, l3)
}

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
			got := engineScenario(t, e, ids, []int{3, 7})
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for i := range want {
				if d := maxAbsDiff(got[i], want[i]); d != 0 {
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
