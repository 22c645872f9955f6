package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// StepStats receives the per-position results of Step; each slice holds at
// least len(canvas) values.
type StepStats struct {
	Entropy []float32 // nats of softmax(z/T)
	Argmax  []int     // the first index of the largest z/T
	Draw    []int     // the categorical draw from softmax(z/T) with the uniform us[i]
}

// Step runs one generation step over canvas (MODEL_SPEC §4.3 steps 1–5) on
// the backend: the denoising forward (Denoise), self-conditioned when
// selfCond on what the engine's logits buffer holds (the previous step's
// tempered logits, or what SetLogits put there); the logits tempered by T in
// place, where they stay for the next step; and per position the entropy,
// the argmax and the draw with the uniform us[i]. Only the statistics come
// back to the host. ctx is checked as Prefill checks it.
func (e *Engine) Step(ctx context.Context, c *Cache, canvas []int, selfCond bool, T float32, us []float64, out StepStats) error {
	return e.run(ctx, "step", func() error { return e.step(ctx, c, canvas, selfCond, T, us, out) })
}

func (e *Engine) step(ctx context.Context, c *Cache, canvas []int, selfCond bool, T float32, us []float64, out StepStats) error {
	C, V := len(canvas), e.m.vocab
	if len(us) < C || len(out.Entropy) < C || len(out.Argmax) < C || len(out.Draw) < C {
		return inputErr("step of %d positions: %d uniforms, outputs of %d, %d and %d", C, len(us),
			len(out.Entropy), len(out.Argmax), len(out.Draw))
	}
	sc := e.s.logits
	if selfCond && (sc == nil || sc.Len() < C*V) {
		return errors.New("model: engine: a self-conditioned step without logits of the canvas's size")
	}
	if !selfCond {
		sc = nil
	}
	if err := e.denoise(ctx, c, canvas, sc, nil); err != nil {
		return err
	}
	logits := e.s.logits
	ent, err := e.s.get(&e.s.ent, C)
	if err != nil {
		return err
	}
	amax, err := e.s.get(&e.s.amax, C)
	if err != nil {
		return err
	}
	draw, err := e.s.get(&e.s.draw, C)
	if err != nil {
		return err
	}
	b := e.b
	err = ops(ctx,
		func() error { return b.Temper(logits, C*V, T) },
		func() error { return b.RowStats(logits, C, V, 1, ent, amax) },
		func() error { return b.Categorical(draw, logits, C, V, us[:C]) },
		func() error { return b.Download(ent, out.Entropy[:C]) })
	if err != nil {
		return err
	}
	host := make([]float32, C)
	for _, r := range []struct {
		src backend.Buf
		dst []int
	}{{amax, out.Argmax}, {draw, out.Draw}} {
		if err := b.Download(r.src, host); err != nil {
			return err
		}
		for i, v := range host {
			r.dst[i] = int(v)
		}
	}
	return nil
}

// SetLogits uploads z ([C][V] values) into the engine's logits buffer: the
// self-conditioning input of the next Step with selfCond (generation's
// one-hot seed, or another engine's logits in a lockstep comparison).
func (e *Engine) SetLogits(z []float32) error {
	if len(z) == 0 || len(z)%e.m.vocab != 0 {
		return inputErr("logits of %d values are not rows of %d", len(z), e.m.vocab)
	}
	b, err := e.s.get(&e.s.logits, len(z))
	if err != nil {
		return err
	}
	if err := e.b.Upload(b, z); err != nil {
		return fmt.Errorf("model: engine: %w", err)
	}
	return nil
}

// Logits downloads the first len(dst) values of the engine's logits buffer:
// after Step, that step's tempered logits ([C][V]).
func (e *Engine) Logits(dst []float32) error {
	if e.s.logits == nil || e.s.logits.Len() < len(dst) {
		return inputErr("no logits of %d values to download", len(dst))
	}
	return e.b.Download(e.s.logits, dst)
}
