package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

// checkBackend refuses backends this build does not have and precisions
// no backend has, before anything is loaded.
func checkBackend(b, precision string) error {
	if !slices.Contains(backend.Names(), b) {
		return usageErr(fmt.Errorf("--backend %s is not built in (valid: %s)", b, strings.Join(backend.Names(), ", ")))
	}
	switch {
	case precision != "f32" && precision != "bf16":
		return usageErr(fmt.Errorf("--precision %s is not one of f32, bf16", precision))
	case b == "cpu" && precision != "f32":
		return usageErr(fmt.Errorf("--precision %s needs a GPU backend (--backend cuda); the cpu backend computes in f32", precision))
	}
	return nil
}

// backendFlags adds --backend and --precision to a command that runs a pack.
func backendFlags(c *cobra.Command, lo *session.Options) {
	c.Flags().StringVar(&lo.Backend, "backend", "cpu", "compute backend: "+strings.Join(backend.Names(), ", "))
	c.Flags().StringVar(&lo.Precision, "precision", "f32", "matrix-product arithmetic of a GPU backend: f32 (exact) or bf16 (tensor cores, fast)")
}

func newParityCmd(e *env) *cobra.Command {
	var (
		ref    string
		asJSON bool
		lo     session.Options
	)
	c := &cobra.Command{
		Use:   "parity PACK --reference FILE [--json] [--backend cpu|cuda] [--precision f32|bf16]",
		Short: "Run the transformers reference scenarios on a pack and compare every tensor",
		Long: `parity loads the pack (every digest verified), replays the scenarios of a reference made by
transformers (reference.safetensors + reference.json side by side: prompt prefill, denoise without and with
self-conditioning, sampler quantities, a committed block then another step) and reports per tensor the max and
mean abs error, cosine and argmax agreement. It exits non-zero when a documented tolerance fails (bounds per
weight format in docs/runtime.md). With a GPU backend the same scenarios also run on the CPU runtime and every
float tensor's difference from it is reported and bounded (docs/cuda.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(lo.Backend, lo.Precision); err != nil {
				return err
			}
			if ref == "" {
				return usageErr(fmt.Errorf("parity: --reference FILE is required"))
			}
			r, b, err := check.ParityRun(args[0], ref, lo)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, parityJSON(r, b)); err != nil {
					return err
				}
			} else {
				renderParity(e.stdout, r, b)
			}
			if !r.Pass {
				return &codedError{err: fmt.Errorf("parity of %s failed its tolerances", args[0]), code: exitFailure, silent: asJSON}
			}
			return nil
		},
	}
	c.Flags().StringVar(&ref, "reference", "", "reference.safetensors (reference.json beside it) or their directory (required)")
	c.Flags().BoolVar(&asJSON, "json", false, "print {pass, cases} as JSON")
	backendFlags(c, &lo)
	c.Flags().IntVar(&lo.Workers, "workers", 0, "forward-pass goroutines (0 = all cores)")
	return c
}

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

func newTokenizeCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "tokenize TOKENIZER_JSON_OR_PACK TEXT [--json]",
		Short: "Print the token ids of a text (bos included), as the tokenizers library would",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, toks, err := session.Tokenize(args[0], args[1])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, map[string]any{"ids": ids, "tokens": toks})
			}
			for i, id := range ids {
				fmt.Fprintf(e.stdout, "%d\t%q\n", id, toks[i])
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print {"ids": [...], "tokens": [...]}`)
	return c
}

func newSmokeCmd(e *env) *cobra.Command {
	var (
		o      check.SmokeOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "smoke PACK [--json] [--reference FILE]",
		Short: "Run a fixed battery on a pack: finite logits, determinism, decodable replies, parity, timings",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := check.Smoke(e.ctx, args[0], o)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, r); err != nil {
					return err
				}
			} else {
				renderSmoke(e.stdout, args[0], r)
			}
			if !r.Pass {
				return &codedError{err: fmt.Errorf("smoke of %s failed", args[0]), code: exitFailure, silent: asJSON}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.Flags().StringVar(&o.Reference, "reference", "", "reference.safetensors for the parity check (default: found from the pack's source)")
	c.Flags().Uint64Var(&o.Seed, "seed", 7, "seed of the determinism check")
	c.Flags().IntVar(&o.Workers, "workers", 0, "forward-pass goroutines (0 = all cores)")
	return c
}
