package generate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/model"
)

// Options tune Generate. The zero value follows transformers (MODEL_SPEC §4)
// with seed 0.
//
// The boolean switches turn on the seed engine's deliberate divergences
// from transformers (MODEL_SPEC §4.6; docs/sampler.md describes each):
//
//   - ArgmaxAccept (#1): accepted positions take the step's argmax token
//     instead of a draw from softmax(Z/T). The draws are still consumed.
//   - FirstStepSC (#2): the first step of each block is self-conditioned on
//     the initial canvas's own embedding (one-hot SC logits) instead of
//     running without self-conditioning.
//   - PlateauStop (#3): also stop when the accept mask has been identical
//     for 8 consecutive steps and the mean entropy is < 0.05 nats.
//   - EntropyOnlyStop (#9): also stop, from the 12th step of a block on,
//     when the mean entropy is < 0.05 nats, without argmax stability.
//   - PadGate (#4): never stop on a step whose argmax canvas is all pad/EOS.
//   - EmptyReplyReroll (#10): when the first block's committed argmax starts
//     with an EOS, pad or BOS id, denoise it again from a fresh canvas, up to
//     3 times, with canvases of max(C>>k, min(C, 64)) positions (256 → 128 →
//     64); the last attempt is kept.
type Options struct {
	// Seed seeds the generation RNG (docs/sampler.md): same seed, same model,
	// same prompt and options give the same tokens.
	Seed uint64
	// MaxNewTokens overrides the config's max_new_tokens when > 0 (and then
	// max_length is ignored). MaxSteps overrides max_denoising_steps when > 0.
	MaxNewTokens, MaxSteps int

	ArgmaxAccept, FirstStepSC, PlateauStop, EntropyOnlyStop, PadGate, EmptyReplyReroll bool

	// Trace, when not nil, is called after every denoising step.
	Trace func(StepTrace)
	// OnBlock, when not nil, is called after every committed block, before
	// the next one is prefilled: a caller streams the reply with it.
	OnBlock func(BlockCommit)
}

// BlockCommit describes one committed block (Options.OnBlock).
type BlockCommit struct {
	Block int // 0-based block index
	// Tokens are the block's committed ids, as Generation.Tokens holds them
	// (pad after the first EOS); the caller may keep them.
	Tokens []int
	Steps  int // the denoising steps the block took (every re-roll's)
	// TotalSteps counts the steps of every block so far.
	TotalSteps int
	// Last is true when generation ends with this block; StopReason then
	// says why ("eos" or "max_length").
	Last       bool
	StopReason string
	// Elapsed is the time since Generate started.
	Elapsed time.Duration
}

// StepTrace describes one executed denoising step.
type StepTrace struct {
	Block       int     // 0-based block index
	Step        int     // 1-based step within the block (k; cur = N − k + 1)
	Accepted    int     // positions in the accept mask
	MeanEntropy float64 // mean entropy of the canvas (nats, the float32 value)
	Temperature float64 // T of the step (the float32 value)
	Stable      bool    // the argmax canvas equals the previous stability_threshold ones
	Stopped     bool    // a stop rule fired: the block ends after this step
	// Argmax is the step's argmax canvas (C ids; the caller may keep it:
	// every step has its own).
	Argmax []int
	// Elapsed is the time since Generate started (progress displays; it
	// changes nothing).
	Elapsed time.Duration
}

// Generation is the result of Generate.
type Generation struct {
	// Tokens are the new tokens only: every committed block in full (k·C
	// tokens, not truncated to max_new_tokens), with the tokens after the
	// first EOS of the last block replaced by pad.
	Tokens []int
	Blocks int // committed blocks
	Steps  int // denoising steps executed, over all blocks
	// StopReason is "eos" (a block held an EOS id), "max_length" (the
	// sequence reached prompt + max_new_tokens) or "canceled".
	StopReason string
}

// Stop reasons of a Generation.
const (
	StopEOS       = "eos"
	StopMaxLength = "max_length"
	StopCanceled  = "canceled"
)

// Generate runs transformers' block-diffusion generate (MODEL_SPEC §4) for
// one sequence: it prefills prompt, then denoises blocks of C =
// canvas_length tokens until a block holds an EOS id or the sequence reaches
// prompt + max_new_tokens (⌈max_new_tokens/C⌉ blocks). Each later block
// first prefills the previous committed block at the positions its canvas
// had; the last block is never prefilled. gc nil means
// DefaultConfig(). The loop checks ctx before every prefill and
// every denoising step, and the Engine within them (between layers and
// ops); when it is done, Generate returns the blocks committed so far
// (StopReason "canceled") and an error wrapping ctx.Err().
func Generate(ctx context.Context, e *model.Engine, prompt []int, gc *Config, o Options) (*Generation, error) {
	return Run(ctx, e.Model().Config(), NewStepper(e), prompt, gc, o)
}

// genRun is the state of one Generate call.
type genRun struct {
	ctx   context.Context
	s     Stepper
	gc    Config // MaxDenoisingSteps is the effective N
	o     Options
	rng   *genRNG
	V     int
	steps int
	start time.Time // when Generate started (the traces' Elapsed)
}

// Run is Generate for any Stepper: the loop, the lengths, the RNG and the
// stop rules are the host's; the forward and the per-position statistics
// are the stepper's.
func Run(ctx context.Context, cfg *layout.Config, s Stepper, prompt []int, gc *Config, o Options) (*Generation, error) {
	if gc == nil {
		gc = DefaultConfig()
	}
	if err := gc.validate(); err != nil {
		return nil, err
	}
	V, C := cfg.Text.VocabSize, cfg.CanvasLength
	switch {
	case V < 1 || C < 1:
		return nil, fmt.Errorf("%w: generate: vocab_size %d, canvas_length %d", model.ErrInput, V, C)
	case o.MaxNewTokens < 0 || o.MaxNewTokens > MaxGenNewTokens:
		return nil, fmt.Errorf("%w: generate: MaxNewTokens = %d out of range [0, %d]", model.ErrInput, o.MaxNewTokens, MaxGenNewTokens)
	case o.MaxSteps < 0 || o.MaxSteps > MaxGenSteps:
		return nil, fmt.Errorf("%w: generate: MaxSteps = %d out of range [0, %d]", model.ErrInput, o.MaxSteps, MaxGenSteps)
	case len(prompt) == 0:
		return nil, fmt.Errorf("%w: generate: the prompt is empty", model.ErrInput)
	case gc.PadTokenID >= V:
		return nil, genErr("pad_token_id = %d is outside the vocabulary [0, %d)", gc.PadTokenID, V)
	}
	for i, id := range prompt {
		if id < 0 || id >= V {
			return nil, fmt.Errorf("%w: generate: prompt[%d] = %d is outside the vocabulary [0, %d)", model.ErrInput, i, id, V)
		}
	}

	// Lengths (MODEL_SPEC §4.1).
	P := len(prompt)
	maxNew := gc.MaxNewTokens
	if o.MaxNewTokens > 0 {
		maxNew = o.MaxNewTokens
	} else if gc.MaxLength > 0 && maxNew == 256 {
		maxNew = gc.MaxLength - P
		if maxNew < 1 {
			return nil, genErr("max_length = %d leaves no new token after the %d-token prompt", gc.MaxLength, P)
		}
	}
	maxLength := P + maxNew

	r := &genRun{ctx: ctx, s: s, gc: *gc, o: o, rng: newGenRNG(o.Seed), V: V, start: time.Now()}
	if o.MaxSteps > 0 {
		r.gc.MaxDenoisingSteps = o.MaxSteps
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	defer s.Close()

	g := &Generation{}
	pending := prompt // the ids the next block prefills: the prompt, then the previous block
	curLen := P       // prompt + committed tokens: the next canvas's first position
	for b := 0; ; b++ {
		if ctx.Err() != nil {
			return r.canceled(g, b)
		}
		if err := s.Prefill(ctx, pending); err != nil {
			if ctx.Err() != nil {
				return r.canceled(g, b)
			}
			return nil, fmt.Errorf("generate: block %d prefill: %w", b, err)
		}
		before := r.steps
		a, err := r.block(b, C)
		if err == nil && b == 0 && o.EmptyReplyReroll {
			for k := 1; k <= genRerollMax && genDegenerateStart(a, gc); k++ {
				a, err = r.block(b, genRerollCanvas(C, k))
				if err != nil {
					break
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.canceled(g, b)
			}
			return nil, err
		}
		// End of block (MODEL_SPEC §4.4): pad after the first EOS.
		eos := slices.IndexFunc(a, func(id int) bool { return slices.Contains(gc.EOSTokenIDs, id) })
		if eos >= 0 {
			for j := eos + 1; j < len(a); j++ {
				a[j] = gc.PadTokenID
			}
		}
		g.Tokens = append(g.Tokens, a...)
		g.Blocks++
		g.Steps = r.steps
		curLen += len(a)
		pending = a
		switch {
		case eos >= 0:
			g.StopReason = StopEOS
		case curLen >= maxLength:
			g.StopReason = StopMaxLength
		}
		if o.OnBlock != nil {
			o.OnBlock(BlockCommit{Block: b, Tokens: slices.Clone(a), Steps: r.steps - before, TotalSteps: r.steps,
				Last: g.StopReason != "", StopReason: g.StopReason, Elapsed: time.Since(r.start)})
		}
		if g.StopReason != "" {
			return g, nil
		}
	}
}

// canceled ends a Generate call that its context stopped while block b was
// being made: the blocks committed before it and the error.
func (r *genRun) canceled(g *Generation, b int) (*Generation, error) {
	g.Steps = r.steps
	g.StopReason = StopCanceled
	return g, fmt.Errorf("generate: interrupted in block %d after %d committed blocks: %w", b, g.Blocks, r.ctx.Err())
}

// block denoises one canvas of C positions (MODEL_SPEC §4.2, §4.3) against
// the cache and returns the argmax canvas of the last executed step.
func (r *genRun) block(b, C int) ([]int, error) {
	V, N, S := r.V, r.gc.MaxDenoisingSteps, r.gc.StabilityThreshold
	canvas := make([]int, C)
	r.rng.ids(canvas, V)
	sc := SCNone // no self-conditioning on the first step
	if r.o.FirstStepSC {
		sc = SCOneHot
	}
	var (
		hist    [][]int // the previous min(S, N) argmax canvases, oldest first
		plateau genPlateau
		ent     = make([]float32, C)
		us      = make([]float64, C)
		noise   = make([]int, C)
		a       []int
	)
	bound := float32(r.gc.EntropyBound)
	confident := float32(r.gc.ConfidenceThreshold)
	for k := 1; k <= N; k++ {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		cur := N - k + 1
		T := Temperature(&r.gc, cur)
		a = make([]int, C)
		// RNG: C categorical draws, then C uniform ids (transformers' order).
		r.rng.uniforms(us)
		draw := make([]int, C)
		err := r.s.Step(r.ctx, canvas, sc, T, us, model.StepStats{Entropy: ent, Argmax: a, Draw: draw})
		if err != nil {
			return nil, fmt.Errorf("generate: block %d step %d: %w", b, k, err)
		}
		mask := AcceptMask(ent, bound)
		r.rng.ids(noise, V)
		next := make([]int, C)
		accepted := 0
		for i := range C {
			switch {
			case !mask[i]:
				next[i] = noise[i]
			case r.o.ArgmaxAccept:
				next[i] = a[i]
			default:
				next[i] = draw[i]
			}
			if mask[i] {
				accepted++
			}
		}
		mean := sampMeanEntropy(ent)
		stable := S == 0
		if S > 0 && len(hist) == S {
			stable = true
			for _, h := range hist {
				if !slices.Equal(h, a) {
					stable = false
					break
				}
			}
		}
		if S > 0 && S <= N {
			if len(hist) == S {
				hist = append(hist[:0], hist[1:]...)
			}
			hist = append(hist, a)
		}
		stop := stable && mean < confident
		if r.o.PlateauStop && plateau.update(mask) >= genPlateauSteps && mean < genPlateauEntropy {
			stop = true
		}
		if r.o.EntropyOnlyStop && k >= genEntropyOnlyMinStep && mean < genEntropyOnlyBound {
			stop = true
		}
		if r.o.PadGate && genAllFiller(a, &r.gc) {
			stop = false
		}
		r.steps++
		if r.o.Trace != nil {
			r.o.Trace(StepTrace{Block: b, Step: k, Accepted: accepted, MeanEntropy: float64(mean),
				Temperature: float64(T), Stable: stable, Stopped: stop, Argmax: a, Elapsed: time.Since(r.start)})
		}
		if stop {
			break
		}
		// Self-conditioning for the next step: this step's tempered logits.
		sc, canvas = SCPrev, next
	}
	return a, nil
}
