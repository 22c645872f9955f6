package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/check"
)

func newVerifyCmd(e *env) *cobra.Command {
	var (
		o           check.VerifyOptions
		generations int
		asJSON      bool
	)
	c := &cobra.Command{
		Use:   "verify PACK [--source SNAPSHOT|ORG/NAME[@REV]|BF16PACK] [--text FILE] [--windows N] [--prompt-len N] [--max-new-tokens N] [--max-steps N] [--rounding] [--sensitivity] [--json] [--plot FILE.png]",
		Short: "Measure how far a pack's outputs are from its bf16 source's, and where it loses",
		Long: `verify runs the pack and its bf16 source on the same inputs and reports the damage: for each window
(held-out text from --text, tokenized with the pack's tokenizer, or pseudo-random tokens) both prefill the same
prefix, then denoise the true canvas corrupted at each noise rate, without and with the same self-conditioning
logits; it reports KL(source‖pack) mean, p99, p99.9 and max, top-1 agreement, each model's accuracy against the
true tokens, per hidden state the relative error and cosine, per layer the router's top-k agreement (cpu
backend), and for a few seeded generations the steps per block and how many committed tokens agree, and
block by block the step cost (pack steps / source steps to converge, with a 95 % bootstrap interval).
With --rounding it also measures the rounding KLD (the source in bf16 against itself in f32, on a backend
with bf16 arithmetic: cuda), so the pack's KLD reads as a multiple of it. With --sensitivity it also runs, for
each class the pack quantizes and for each layer's expert banks, the source with only those tensors taken from
the pack, on the same windows and generations: the KLD mean and step cost each costs alone, to choose --set
overrides for a size budget.

The default source is the one the pack records (a layered pack's pinned snapshot, else the snapshot it was
quantized from); a snapshot is run as a temporary bf16 pack layered over the cache. Both models are loaded at
once on the chosen backend.

It reads the pack, its source, and --text.

Exit codes: 0 with a report, whatever the numbers; 2 usage (an option out of range, no source found, a
quantized source or one of another model, a --plot in a forbidden place); 3 not a pack, a pack that does not
load, a --text that does not exist, is not UTF-8 or is too short; 4 the source is not in the hub cache (the
message gives the dgq download); 5 a --text that cannot be read, a plot that cannot be written, a --tmp that
cannot be written or lacks the space for a copy of the source; 6 the backend cannot run here; 130
interrupted (143 by SIGTERM).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(o.Load.Backend, o.Load.Precision); err != nil {
				return err
			}
			if generations < 0 {
				return usageErr(fmt.Errorf("verify: --generations %d must be ≥ 0", generations))
			}
			if o.Generations = generations; generations == 0 {
				o.Generations = -1 // none
			}
			o.Progress, o.Steps, o.Notify = newProgress(e), newCountProgress(e), notifier(e)
			o.Load.Note = onceNotifier(e) // both models load: said once
			r, err := check.Verify(e.ctx, args[0], o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, r)
			}
			renderVerify(e.stdout, r)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Source, "source", "", "bf16 pack, snapshot folder or ORG/NAME[@REV] to compare with (default: the source the pack records)")
	f.StringVar(&o.Text, "text", "", "UTF-8 file of held-out text (default: pseudo-random token windows)")
	f.IntVar(&o.Windows, "windows", check.VerifyWindows, "windows measured")
	f.IntVar(&o.Prefix, "prompt-len", check.VerifyPrefix, "tokens prefilled before each canvas (bos included)")
	f.IntVar(&o.Canvas, "canvas", 0, "canvas positions (0 = the config's canvas_length)")
	f.Float64SliceVar(&o.NoiseRates, "noise-rates", check.VerifyNoiseRates, "fractions of the canvas corrupted, each in (0, 1]")
	f.IntVar(&generations, "generations", check.VerifyGenerations, "seeded generations compared (0 = none)")
	f.IntVar(&o.GenTokens, "max-new-tokens", 0, "new tokens of each generation (0 = one canvas)")
	f.IntVar(&o.GenSteps, "max-steps", 0, "denoising steps per block of each generation (0 = the generation config's)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the random windows, the corruption and the generations")
	f.BoolVar(&o.Rounding, "rounding", false, "also measure the rounding KLD: the source in bf16 against itself in f32 (loads the source once more; cuda)")
	f.BoolVar(&o.Sensitivity, "sensitivity", false, "also measure each quantized class, and each layer's experts, alone: the source with only those tensors from the pack (one more model run per entry)")
	f.StringVar(&o.Plot, "plot", "", "also write a PNG chart (per-layer relative error, KLD per noise rate) to this file")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	backendFlags(c, &o.Load)
	f.IntVar(&o.Load.Workers, "workers", 0, "forward-pass goroutines of the cpu backend (0 = all cores)")
	f.BoolVar(&o.Load.SkipDigests, "skip-digests", false, "trust the packs' digests instead of verifying them at load")
	f.StringVar(&o.Tmp, "tmp", "", "folder for a snapshot source's temporary bf16 pack (default $TMPDIR)")
	renamedFlag(e, c, "prefix", "prompt-len")
	renamedFlag(e, c, "gen-tokens", "max-new-tokens")
	renamedFlag(e, c, "gen-steps", "max-steps")
	return c
}

// renderVerify prints a verify report as text: the headline numbers, the
// per-noise table, the per-layer table and the generations.
func renderVerify(w io.Writer, r *check.VerifyReport) {
	fmt.Fprintf(w, "pack %s\nsource %s (%s), backend %s %s\n", r.Pack, r.Source, r.SourceKind, r.Backend, r.Precision)
	fmt.Fprintf(w, "text %s: %d windows, prefix %d, canvas %d, %d positions compared\n", r.Text, r.Windows, r.Prefix, r.Canvas, r.Positions)
	fmt.Fprintf(w, "KLD(source‖pack): mean %.4g  p99 %.4g  p99.9 %.4g  max %.4g\n", r.KLD.Mean, r.KLD.P99, r.KLD.P999, r.KLD.Max)
	fmt.Fprintf(w, "top-1 agreement %.4f; accuracy vs the true tokens: source %.4f, pack %.4f\n", r.Top1, r.Accuracy.Source, r.Accuracy.Pack)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nnoise\tsc\tkld mean\tkld p99\tkld max\ttop-1\tacc source\tacc pack\t")
	for _, n := range r.PerNoise {
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%.4g\t%.4f\t%.4f\t%.4f\t\n", strconv.FormatFloat(n.Rate, 'g', -1, 64),
			map[bool]string{false: "off", true: "on"}[n.SC], n.KLDMean, n.KLDP99, n.KLDMax, n.Top1, n.AccSource, n.AccPack)
	}
	fmt.Fprintln(tw, "\nlayer\trel err\tcosine\trouter top-k\t")
	for _, l := range r.Layers {
		router := "-"
		if l.RouterAgreement != nil {
			router = fmt.Sprintf("%.4f", *l.RouterAgreement)
		}
		fmt.Fprintf(tw, "%d\t%.4g\t%.6f\t%s\t\n", l.Layer, l.RelErr, l.Cosine, router)
	}
	tw.Flush()
	if g := r.Generation; g != nil {
		fmt.Fprintf(w, "\ngenerations: %d of %d tokens, %d identical, token agreement %.4f, steps per block: source %.2f, pack %.2f; argmax settled at step: source %.2f, pack %.2f\n",
			g.Runs, g.Tokens, g.Identical, g.TokenAgreement, g.StepsPerBlock.Source, g.StepsPerBlock.Pack, g.SettleSteps.Source, g.SettleSteps.Pack)
	}
	if c := r.Convergence; c != nil {
		fmt.Fprintf(w, "convergence: %d blocks, steps per block source %.2f (p50 %g, p90 %g), pack %.2f (p50 %g, p90 %g); step cost %.3f (95%% CI %.3f–%.3f); at the limit of %d steps: source %d, pack %d\n",
			c.Blocks, c.SourceStepsMean, c.SourceSteps.P50, c.SourceSteps.P90, c.PackStepsMean, c.PackSteps.P50, c.PackSteps.P90,
			c.StepCost, c.StepCostCI95[0], c.StepCostCI95[1], c.StepLimit, c.SourceAtLimit, c.PackAtLimit)
	}
	if r.RoundingKLDMean != nil {
		fmt.Fprintf(w, "rounding KLD (source bf16 vs f32): mean %.4g", *r.RoundingKLDMean)
		if r.KLDVsRounding != nil {
			fmt.Fprintf(w, "; the pack's KLD is %.3g× it", *r.KLDVsRounding)
		}
		fmt.Fprintln(w)
	}
	if r.Sensitivity != nil {
		renderSensitivity(w, r.Sensitivity)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "notes: %s\n", strings.Join(r.Notes, "; "))
	}
	if r.Plot != "" {
		fmt.Fprintf(w, "plot: %s\n", r.Plot)
	}
}

// renderSensitivity prints the --sensitivity table: each class alone, then
// each layer's experts alone ("-": a whole class, or no step cost).
func renderSensitivity(w io.Writer, rows []check.VerifySensitivity) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "sensitivity: the pack quantizes nothing")
		return
	}
	fmt.Fprintln(w, "\nsensitivity (the source with only these tensors from the pack):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tlayer\tkld mean\tstep cost\t")
	for _, r := range rows {
		layer, cost := "-", "-"
		if r.Layer != nil {
			layer = strconv.Itoa(*r.Layer)
		}
		if r.StepCost != nil {
			cost = fmt.Sprintf("%.3f", *r.StepCost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%s\t\n", r.Class, layer, r.KLDMean, cost)
	}
	tw.Flush()
}
