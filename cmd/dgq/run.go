package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

func newRunCmd(e *env) *cobra.Command {
	var (
		o     session.RunOptions
		lo    session.Options
		trace bool
	)
	c := &cobra.Command{
		Use:   "run PACK --prompt TEXT [--seed N] [--max-new-tokens N] [--max-steps N] [--trace]",
		Short: "Generate a reply with the pack (transformers sampler semantics by default)",
		Long: `run formats the prompt as one user turn of the Gemma chat format (--raw: plain text), generates with
the entropy-bound block-diffusion sampler of transformers (docs/sampler.md) and prints the reply. The same seed
gives the same output. The seed engine's deliberate divergences are available as switches, all off by default.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(lo.Backend, lo.Precision); err != nil {
				return err
			}
			if trace {
				o.Generation.Trace = func(s generate.StepTrace) {
					fmt.Fprintf(e.stderr, "block %d step %2d: T %.4f accepted %3d mean entropy %.4f%s\n", s.Block, s.Step, s.Temperature, s.Accepted, s.MeanEntropy, map[bool]string{true: " stop", false: ""}[s.Stopped])
				}
			}
			r, err := session.Reply(e.ctx, args[0], lo, o)
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, r.Reply)
			if trace {
				fmt.Fprintf(e.stderr, "%d prompt tokens, %d new tokens in %d blocks, %d steps, stop: %s, %s\n", len(r.PromptIDs), len(r.Tokens), r.Generation.Blocks, r.Generation.Steps, r.Generation.StopReason, r.Elapsed.Round(1e6))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Prompt, "prompt", "", "the user message")
	f.BoolVar(&o.Raw, "raw", false, "feed the prompt as plain text instead of a chat turn")
	f.Uint64Var(&o.Generation.Seed, "seed", 0, "sampler seed")
	f.IntVar(&o.Generation.MaxNewTokens, "max-new-tokens", 0, "new tokens (0 = generation_config.json)")
	f.IntVar(&o.Generation.MaxSteps, "max-steps", 0, "denoising steps per block (0 = generation_config.json)")
	f.BoolVar(&trace, "trace", false, "print each step's accepted count and mean entropy on stderr")
	f.BoolVar(&o.Generation.ArgmaxAccept, "argmax-accept", false, "divergence: accepted positions take the argmax, not a sample")
	f.BoolVar(&o.Generation.FirstStepSC, "first-step-sc", false, "divergence: self-condition the first step on the canvas itself")
	f.BoolVar(&o.Generation.PlateauStop, "plateau-stop", false, "divergence: stop when the accept mask is unchanged for 8 steps and entropy is low")
	f.BoolVar(&o.Generation.EntropyOnlyStop, "entropy-only-stop", false, "divergence: stop on mean entropy < 0.05 without stability (from step 12)")
	f.BoolVar(&o.Generation.PadGate, "pad-gate", false, "divergence: never stop on an all-pad/EOS canvas")
	f.BoolVar(&o.Generation.EmptyReplyReroll, "empty-reply-reroll", false, "divergence: re-roll a first block that starts with EOS/pad/BOS")
	backendFlags(c, &lo)
	f.IntVar(&lo.Workers, "workers", 0, "forward-pass goroutines (0 = all cores)")
	c.PreRunE = func(*cobra.Command, []string) error {
		if strings.TrimSpace(o.Prompt) == "" {
			return usageErr(fmt.Errorf("run: --prompt TEXT is required"))
		}
		return nil
	}
	return c
}
