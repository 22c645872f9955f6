package generate

import (
	"context"

	"github.com/dgq-dev/dgq/runtime/model"
)

// SC says what a denoising step is self-conditioned on.
type SC int

const (
	SCNone   SC = iota // no self-conditioning (a block's first step)
	SCPrev             // the previous step's tempered logits
	SCOneHot           // one-hot logits of the canvas itself (divergence #2)
)

// Stepper is one sequence's forward pass as the generation loop drives it:
// the loop keeps the lengths, the RNG and the stop rules; the stepper keeps
// the cache and the logits (on a device they never leave it). Steppers are
// made by NewStepper; the checks wrap two of them (the lockstep
// comparison), and tests drive the loop with crafted logits.
type Stepper interface {
	// Start prepares an empty sequence; Close releases it.
	Start() error
	Close()
	// Prefill appends ids to the sequence's cache.
	Prefill(ctx context.Context, ids []int) error
	// Step denoises canvas conditioned per sc, tempers the logits by T
	// (kept for the next step's SCPrev), and writes each position's
	// entropy, argmax and categorical draw with the uniform us[i] to out.
	//
	// Both stop early when ctx is done, returning an error that wraps
	// ctx.Err() (the Engine's checks: model.Engine.Prefill).
	Step(ctx context.Context, canvas []int, sc SC, T float32, us []float64, out model.StepStats) error
}

// NewStepper returns the Stepper of one sequence on an Engine: the forward
// and the per-position statistics run on the engine's backend (Engine.Step).
func NewStepper(e *model.Engine) Stepper { return &engineStepper{e: e} }

type engineStepper struct {
	e     *model.Engine
	cache *model.Cache
}

func (s *engineStepper) Start() error {
	s.Close()
	s.cache = s.e.NewCache()
	return nil
}

func (s *engineStepper) Close() {
	if s.cache != nil {
		s.cache.Free()
		s.cache = nil
	}
}

func (s *engineStepper) Prefill(ctx context.Context, ids []int) error {
	return s.e.Prefill(ctx, s.cache, ids, nil)
}

func (s *engineStepper) Step(ctx context.Context, canvas []int, sc SC, T float32, us []float64, out model.StepStats) error {
	if sc == SCOneHot {
		if err := s.e.SetLogits(genOneHotSC(canvas, s.e.Model().Vocab())); err != nil {
			return err
		}
	}
	return s.e.Step(ctx, s.cache, canvas, sc != SCNone, T, us, out)
}
