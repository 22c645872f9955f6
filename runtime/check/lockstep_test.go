package check

import (
	"context"
	"math"
	"testing"

	"github.com/dgq-dev/dgq/runtime/generate"
)

// In lockstep with itself (an Engine on the CPU backend against another),
// every step agrees exactly: nothing to explain.
func TestGenerateLockstepCPU(t *testing.T) {
	e := loadEngine(t, "tiny", "bf16")
	r, err := GenerateLockstep(context.Background(), e, []int{2, 17, 33, 5, 90, 41}, nil, generate.Options{Seed: 4, MaxNewTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	if r.Steps == 0 || r.Positions != r.Steps*e.Model().Config().CanvasLength || r.MaxEntropyDiff != 0 || r.Argmax+r.Draw+r.Mask != 0 {
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
