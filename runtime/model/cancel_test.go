package model

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// cancelAt is the CPU backend that cancels a context when its n-th matrix
// product starts (n ≥ 1; 0 never) and records the context the Engine lends
// it (backend.Cancelable, promoted from *cpu.Backend and watched here).
type cancelAt struct {
	*cpu.Backend
	n, calls int
	cancel   context.CancelFunc
	lent     context.Context
}

func (b *cancelAt) MatMulNT(c, a backend.Buf, w backend.Weight, m int) error {
	if b.calls++; b.calls == b.n {
		b.cancel()
	}
	return b.Backend.MatMulNT(c, a, w, m)
}

func (b *cancelAt) SetContext(ctx context.Context) {
	b.lent = ctx
	b.Backend.SetContext(ctx)
}

// A context canceled before or during Prefill, Denoise or Step ends the call
// with an error wrapping context.Canceled: before, no op runs; during (the
// CPU backend's product itself sees it), the op stops at once. The cache
// is as it was, the backend gets its context back (nil), and the engine
// then computes exactly what an engine never interrupted does.
func TestEngineInterrupted(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	ids := fixture.RefIDs(t, "tiny")
	prompt, canvas := ids["prompt_ids"], ids["canvas1_ids"]
	C := len(canvas)
	us := make([]float64, C)
	out := StepStats{Entropy: make([]float32, C), Argmax: make([]int, C), Draw: make([]int, C)}
	want := func() []float32 { // an engine never interrupted
		e := cpuEngine(t, m, 0)
		c := e.NewCache()
		defer c.Free()
		if err := e.Prefill(t.Context(), c, prompt, nil); err != nil {
			t.Fatal(err)
		}
		z, err := e.Denoise(t.Context(), c, canvas, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}()
	calls := []struct {
		name    string
		prefill bool // the call is the prompt's prefill (else it runs after it)
		call    func(ctx context.Context, e *Engine, c *Cache) error
	}{
		{"prefill", true, func(ctx context.Context, e *Engine, c *Cache) error { return e.Prefill(ctx, c, prompt, nil) }},
		{"denoise", false, func(ctx context.Context, e *Engine, c *Cache) error {
			_, err := e.Denoise(ctx, c, canvas, nil, nil)
			return err
		}},
		{"step", false, func(ctx context.Context, e *Engine, c *Cache) error {
			return e.Step(ctx, c, canvas, false, 0.8, us, out)
		}},
	}
	for _, call := range calls {
		// The call's matrix products, counted on an engine left alone.
		counted := &cancelAt{Backend: cpu.New(0)}
		ce, err := NewEngine(m, counted)
		if err != nil {
			t.Fatal(err)
		}
		cc := ce.NewCache()
		if !call.prefill {
			if err := ce.Prefill(t.Context(), cc, prompt, nil); err != nil {
				t.Fatal(err)
			}
		}
		before := counted.calls
		if err := call.call(t.Context(), ce, cc); err != nil {
			t.Fatal(err)
		}
		products := counted.calls - before
		cc.Free()
		ce.Close()
		for _, at := range []int{-1, 1, products / 2, products} { // -1: canceled before the call
			b := &cancelAt{Backend: cpu.New(0)}
			e, err := NewEngine(m, b)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			c := e.NewCache()
			defer c.Free()
			if !call.prefill {
				if err := e.Prefill(t.Context(), c, prompt, nil); err != nil {
					t.Fatal(err)
				}
			}
			before, done := c.Len(), b.calls
			ctx, cancel := context.WithCancel(t.Context())
			b.cancel = cancel
			if at < 0 {
				cancel()
			} else {
				b.n = done + at
			}
			err = call.call(ctx, e, c)
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s canceled at product %d: err %v", call.name, at, err)
			}
			if ran := b.calls - done; (at < 0 && ran != 0) || (at > 0 && ran != at) {
				t.Errorf("%s canceled at product %d: %d products started", call.name, at, ran)
			}
			if c.Len() != before || b.lent != nil {
				t.Errorf("%s canceled at product %d: cache length %d (was %d), backend context %v", call.name, at, c.Len(), before, b.lent)
			}
			if call.prefill {
				if err := e.Prefill(t.Context(), c, prompt, nil); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.Denoise(t.Context(), c, canvas, nil, nil)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s canceled at product %d: the next denoise differs from an uninterrupted engine's (%v)", call.name, at, err)
			}
		}
	}
}

// StepMACs counts, per position, rows × columns of every matrix a
// self-conditioned denoising step multiplies (the experts' at top-k of E),
// as the tensors layout.ExpectedText lists for the config: for the tiny
// fixture, and for the released model's shapes (about 1.1·10¹² at 256
// positions, docs/runtime.md).
func TestStepMACs(t *testing.T) {
	fromTensors := func(c *layout.Config) float64 {
		var perPos float64
		for _, tn := range layout.ExpectedText(c) {
			n := layout.DecoderPrefix
			if len(tn.Name) < len(n) || tn.Name[:len(n)] != n || len(tn.Shape) < 2 {
				continue // the encoder's (tied) and the vectors
			}
			size := float64(tn.Shape[len(tn.Shape)-1]) * float64(tn.Shape[len(tn.Shape)-2])
			switch {
			case len(tn.Shape) == 3: // experts: [E, rows, cols], top-k of them
				size *= float64(c.Text.TopK)
			case tn.Name == layout.DecoderPrefix+"embed_tokens.weight":
				size *= 2 // the lm_head (tied) and the soft embedding
			}
			perPos += size
		}
		return perPos
	}
	for _, tc := range []struct {
		name      string
		config    func(t *testing.T) *layout.Config
		lo, hi    float64 // bounds of StepMACs at 256 positions
		positions int
	}{
		{"tiny", func(t *testing.T) *layout.Config { return loadModel(t, "tiny", "bf16").Config() }, 0, 1e9, 16},
		{"real 1 layer", func(t *testing.T) *layout.Config { return parseConfig(t, dgq.SynthConfig(1)) }, 0.40e12, 0.42e12, 256},
		{"real 30 layers", func(t *testing.T) *layout.Config { return parseConfig(t, dgq.SynthConfig(30)) }, 1.05e12, 1.2e12, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.config(t)
			got := StepMACs(c, tc.positions)
			if want := fromTensors(c) * float64(tc.positions); got != want || got < tc.lo || got > tc.hi {
				t.Errorf("StepMACs = %.4g, from the tensors %.4g, want within [%.3g, %.3g]", got, want, tc.lo, tc.hi)
			}
		})
	}
}

func parseConfig(t *testing.T, b []byte) *layout.Config {
	t.Helper()
	c, err := layout.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
