package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/session"
)

func newRunCmd(e *env) *cobra.Command {
	var (
		o      session.RunOptions
		lo     session.Options
		trace  bool
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "run PACK --prompt TEXT [--seed N] [--max-new-tokens N] [--max-steps N] [--trace] [--json]",
		Short: "Generate a reply with the pack (transformers sampler semantics by default)",
		Long: `run formats the prompt as one user turn of the Gemma chat format (--raw: plain text), generates with
the entropy-bound block-diffusion sampler of transformers (docs/sampler.md) and prints the reply as it is made,
block by block, then one line of statistics on stderr (on a terminal, a status line shows the step, block and
tokens/s meanwhile). The same seed gives the same output. Interrupted (Ctrl-C), it keeps the committed blocks'
text and says how far it got. The seed engine's deliberate divergences are available as switches, all off by
default.

It reads the pack (every digest verified unless --skip-digests), its tokenizer and generation config. The CPU
backend is the reference and takes minutes per denoising step of the 26B model: chat with it on a GPU,
--backend cuda or --backend metal.

Exit codes: 0; 2 usage (an empty --prompt, an option out of range, an unknown backend or precision); 3 not a
pack, a pack that does not load or has no tokenizer; 4 a pack or base shard not in the hub cache; 6 the
backend cannot run here; 130 interrupted (143 by SIGTERM; the reply so far stays on stdout).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(lo.Backend, lo.Precision); err != nil {
				return err
			}
			out := newRunOutput(e, o, lo, trace, asJSON)
			o.Generation.Trace, o.Stream, lo.Note = out.step, out.chunk, out.note()
			r, err := session.Reply(e.ctx, args[0], lo, o)
			return out.finish(r, err)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Prompt, "prompt", "", "the user message")
	f.BoolVar(&o.Raw, "raw", false, "feed the prompt as plain text instead of a chat turn")
	f.Uint64Var(&o.Generation.Seed, "seed", 0, "sampler seed")
	f.IntVar(&o.Generation.MaxNewTokens, "max-new-tokens", 0, "new tokens (0 = generation_config.json)")
	f.IntVar(&o.Generation.MaxSteps, "max-steps", 0, "denoising steps per block (0 = generation_config.json)")
	f.BoolVar(&trace, "trace", false, "print each step's accepted count and mean entropy on stderr")
	f.BoolVar(&asJSON, "json", false, "print one JSON object at the end instead of streaming the reply")
	f.BoolVar(&o.Generation.ArgmaxAccept, "argmax-accept", false, "divergence: accepted positions take the argmax, not a sample")
	f.BoolVar(&o.Generation.FirstStepSC, "first-step-sc", false, "divergence: self-condition the first step on the canvas itself")
	f.BoolVar(&o.Generation.PlateauStop, "plateau-stop", false, "divergence: stop when the accept mask is unchanged for 8 steps and entropy is low")
	f.BoolVar(&o.Generation.EntropyOnlyStop, "entropy-only-stop", false, "divergence: stop on mean entropy < 0.05 without stability (from step 12)")
	f.BoolVar(&o.Generation.PadGate, "pad-gate", false, "divergence: never stop on an all-pad/EOS canvas")
	f.BoolVar(&o.Generation.EmptyReplyReroll, "empty-reply-reroll", false, "divergence: re-roll a first block that starts with EOS/pad/BOS")
	backendFlags(c, &lo)
	f.IntVar(&lo.Workers, "workers", 0, "forward-pass goroutines (0 = all cores)")
	f.BoolVar(&lo.SkipDigests, "skip-digests", false, "trust the pack's digests instead of verifying them at load")
	c.PreRunE = func(*cobra.Command, []string) error {
		if strings.TrimSpace(o.Prompt) == "" {
			return usageErr(fmt.Errorf("run: --prompt TEXT is required"))
		}
		return nil
	}
	return c
}
