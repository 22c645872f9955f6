package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/check"
)

func newBenchCmd(e *env) *cobra.Command {
	var (
		o      check.BenchOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "bench PACK [--backend cpu|cuda|metal] [--precision f32|bf16] [--prompt-len N] [--canvas N] [--reps N] [--time-ops] [--json]",
		Short: "Time a prefill and one generation step of a pack on a backend",
		Long: `bench loads the pack (digests verified unless --skip-digests) on the backend and times, after one
warm-up each, a prefill of --prompt-len random tokens into an empty cache and one generation step at that
context: the denoising forward over --canvas random positions self-conditioned on the previous step, then the
sampler statistics (temper, entropy, argmax, draws) back on the host. Wall-clock milliseconds, synchronized
with the device (docs/performance.md). --time-ops (GPU backends) also times every backend op of one prefill and
one step, each op synchronized.

It reads the pack only: the ids are random, from --seed.

Exit codes: 0; 2 usage (an option out of range, an unknown backend or precision); 3 not a pack, a pack that
does not load; 4 a pack or base shard not in the hub cache; 6 the backend cannot run here; 130 interrupted (143 by SIGTERM).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(o.Load.Backend, o.Load.Precision); err != nil {
				return err
			}
			o.Load.Note = onceNotifier(e) // the cpu backend's cost of a step on a large model
			o.Steps = newCountProgress(e)
			r, err := check.Bench(e.ctx, args[0], o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, r)
			}
			renderBench(e.stdout, r)
			return nil
		},
	}
	f := c.Flags()
	backendFlags(c, &o.Load)
	f.BoolVar(&o.Load.SkipDigests, "skip-digests", false, "trust the pack's digests instead of verifying them at load")
	f.IntVar(&o.PromptLen, "prompt-len", check.BenchPromptLen, "tokens to prefill (with --canvas, at most the model's max_position_embeddings)")
	f.IntVar(&o.Canvas, "canvas", 0, "canvas positions of the timed step (0 = the config's canvas_length, also the most)")
	f.IntVar(&o.Reps, "reps", check.BenchReps, "timed repetitions after one warm-up (1 to 1000)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the random ids")
	f.IntVar(&o.Load.Workers, "workers", 0, "forward-pass goroutines of the cpu backend (0 = all cores)")
	f.BoolVar(&o.Profile, "time-ops", false, "also time every backend op of one prefill and one step (GPU backends; each op synchronized)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	renamedFlag(e, c, "profile", "time-ops")
	return c
}

// renderBench prints the report of a bench run as text.
func renderBench(w io.Writer, r *check.BenchReport) {
	fmt.Fprintf(w, "%s (%s, %s): %s, %s of weights, loaded in %.1f s\n", r.Device, r.Backend, r.Precision, plural(r.Layers, "layer", "layers"), humanBytes(r.WeightBytes), r.LoadSeconds)
	for _, t := range r.Timings {
		fmt.Fprintf(w, "  %-13s %5d tokens: median %8.2f ms (min %.2f, max %.2f), %.0f tokens/s\n", t.What, t.Tokens, t.Median, t.Min, t.Max, t.TokS)
	}
	for _, what := range []string{"prefill", "denoise_step"} {
		if ops := r.Profile[what]; ops != nil {
			fmt.Fprintf(w, "  %s, each op synchronized:\n", what)
			for _, op := range ops {
				fmt.Fprintf(w, "    %-12s %5d calls %9.3f ms\n", op.Op, op.Calls, op.Ms)
			}
		}
	}
}
