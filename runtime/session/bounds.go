package session

import (
	"fmt"

	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/runtime/generate"
)

// promptSlack bounds the tokens the chat format adds around a prompt (the
// turn markers, bos): a prompt of n bytes is at most n + promptSlack tokens
// (the tokenizer's byte fallback gives at most one token per byte).
const promptSlack = 64

// newTokens is the new tokens a generation asks for, as generate.Run
// decides them: flag when > 0, else the generation config's max_length
// less the prompt when it sets one and max_new_tokens is left at its
// default, else max_new_tokens.
func newTokens(gc *generate.Config, flag, prompt int) (n int, option string) {
	switch {
	case flag > 0:
		return flag, "--max-new-tokens"
	case gc.MaxLength > 0 && gc.MaxNewTokens == 256:
		return max(gc.MaxLength-prompt, 1), "generation_config.json max_length"
	}
	return gc.MaxNewTokens, "generation_config.json max_new_tokens"
}

// check refuses the lengths of a run before anything is loaded: a negative
// --max-new-tokens or --max-steps, --max-steps above generate.MaxGenSteps,
// and new tokens that, in whole blocks of the canvas, would not fit in the
// model's positions even after a one-token prompt. It returns the run's
// workload for the memory estimate, sized for the prompt's bytes.
func (o RunOptions) check(spec *Spec) (*Workload, error) {
	g := o.Generation
	if err := limits.First(nil,
		limits.NonNegative("--max-new-tokens", g.MaxNewTokens, "0 takes generation_config.json's max_new_tokens"),
		limits.NonNegative("--max-steps", g.MaxSteps, "0 takes generation_config.json's max_denoising_steps"),
		limits.Max("--max-steps", g.MaxSteps, generate.MaxGenSteps, fmt.Sprintf("the maximum of %d steps per block", generate.MaxGenSteps)),
	); err != nil {
		return nil, err
	}
	n, option := newTokens(spec.GenConfig, g.MaxNewTokens, 1)
	if err := spec.CheckPositions(option, n, 1+spec.Blocks(n), fmt.Sprintf("after a one-token prompt, in whole blocks of %d", spec.Config.CanvasLength)); err != nil {
		return nil, err
	}
	C, maxPos := spec.Config.CanvasLength, spec.MaxPositions()
	prompt := min(len(o.Prompt)+promptSlack, maxPos)
	n, _ = newTokens(spec.GenConfig, g.MaxNewTokens, prompt)
	return &Workload{Prefill: prompt, Canvas: C, Step: C, Positions: min(prompt+spec.Blocks(n), maxPos)}, nil
}

// checkPrompt refuses a generation after a prompt of p tokens whose new
// tokens, in whole blocks of the canvas, would exceed the model's
// positions.
func (o RunOptions) checkPrompt(spec *Spec, p int) error {
	n, option := newTokens(spec.GenConfig, o.Generation.MaxNewTokens, p)
	return spec.CheckPositions(option, n, p+spec.Blocks(n), fmt.Sprintf("after the prompt's %d tokens, in whole blocks of %d", p, spec.Config.CanvasLength))
}
