package runtime

import (
	"context"
	"errors"
)

// Generate runs transformers' block-diffusion generate (Model.Generate, the
// same options and results) with the forward pass and the per-position
// sampler statistics (temper, entropy, argmax, categorical draws) on the
// engine's backend. Per step only the canvas ids go up and three values per
// position come back; the logits and the self-conditioning input stay on
// the backend.
func (e *Engine) Generate(ctx context.Context, prompt []int, gc *GenerationConfig, o GenerateOptions) (*Generation, error) {
	return generateWith(ctx, e.m.cfg, &engineStepper{e: e}, prompt, gc, o)
}

// engineStepper is the generation loop's stepper on an Engine.
type engineStepper struct {
	e     *Engine
	cache *EngineCache
	draws []float32
	stats []float32
}

func (s *engineStepper) start() error {
	s.cache = s.e.NewCache()
	return nil
}

func (s *engineStepper) close() {
	if s.cache != nil {
		s.cache.Free()
		s.cache = nil
	}
}

func (s *engineStepper) prefill(ids []int) error { return s.e.Prefill(s.cache, ids, nil) }

func (s *engineStepper) step(canvas []int, sc scMode, T float32, us []float64, ent []float32, amax []int) (func(int) int, error) {
	e, b := s.e, s.e.b
	C, V := len(canvas), e.m.vocab
	var scb Buf
	switch sc {
	case scPrev:
		scb = e.s.logits // the previous step's tempered logits, still there
		if scb == nil || scb.Len() < C*V {
			return nil, errors.New("runtime: engine: self-conditioning on a step that has no predecessor")
		}
	case scOneHot:
		lb, err := e.grow(&e.s.logits, C*V)
		if err != nil {
			return nil, err
		}
		if err := b.Upload(lb, genOneHotSC(canvas, V)); err != nil {
			return nil, err
		}
		scb = lb
	}
	if err := e.denoise(s.cache, canvas, scb, nil); err != nil {
		return nil, err
	}
	logits := e.s.logits
	entb, err := e.grow(&e.s.ent, C)
	if err != nil {
		return nil, err
	}
	amaxb, err := e.grow(&e.s.amax, C)
	if err != nil {
		return nil, err
	}
	drawb, err := e.grow(&e.s.draw, C)
	if err != nil {
		return nil, err
	}
	for _, op := range []func() error{
		func() error { return b.Temper(logits, C*V, T) },
		func() error { return b.RowStats(logits, C, V, 1, entb, amaxb) },
		func() error { return b.Categorical(drawb, logits, C, V, us) },
	} {
		if err := op(); err != nil {
			return nil, err
		}
	}
	s.stats = grow32(s.stats, C)
	if err := b.Download(entb, ent[:C]); err != nil {
		return nil, err
	}
	if err := b.Download(amaxb, s.stats); err != nil {
		return nil, err
	}
	for i, v := range s.stats {
		amax[i] = int(v)
	}
	s.draws = grow32(s.draws, C)
	if err := b.Download(drawb, s.draws); err != nil {
		return nil, err
	}
	draws := s.draws
	return func(i int) int { return int(draws[i]) }, nil
}
