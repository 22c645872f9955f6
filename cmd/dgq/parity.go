package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/session"
)

func newParityCmd(e *env) *cobra.Command {
	var (
		ref    string
		asJSON bool
		lo     session.Options
	)
	c := &cobra.Command{
		Use:   "parity PACK --reference FILE [--json] [--backend cpu|cuda|metal] [--precision f32|bf16]",
		Short: "Run the transformers reference scenarios on a pack and compare every tensor",
		Long: `parity loads the pack (every digest verified unless --skip-digests), replays the scenarios of a reference made by
transformers (reference.safetensors + reference.json side by side: prompt prefill, denoise without and with
self-conditioning, sampler quantities, a committed block then another step) and reports per tensor the max and
mean abs error, cosine and argmax agreement. When the reference carries float64 results every float tensor is
measured against them and bounded by twice transformers' own float32 error (docs/runtime.md). It exits non-zero
when a tolerance fails. It gives a verdict only where one means something: a bf16 pack against its source's
reference, or a pack against a reference made from its own decoded weights; for a quantized pack against its
source's reference it prints the numbers, refuses the verdict (exit 2) and points to dgq verify. With a GPU
backend the same scenarios also run on the CPU backend and every float tensor's difference from it is reported
and bounded (docs/cuda.md).

It reads the pack and the reference.

Exit codes: 0 a verdict, and every case passed; 1 a case failed its bound; 2 usage, or no verdict (the numbers
are printed, the message says why); 3 not a pack, a pack that does not load, a missing or malformed reference;
4 a pack or base shard not in the hub cache; 6 the backend cannot run here; 130 interrupted (143 by SIGTERM).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(lo.Backend, lo.Precision); err != nil {
				return err
			}
			if ref == "" {
				return usageErr(fmt.Errorf("parity: --reference FILE is required"))
			}
			r, b, err := check.ParityRun(e.ctx, args[0], ref, lo)
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
			if r.Verdict && !r.Pass {
				return &codedError{err: fmt.Errorf("parity of %s failed its tolerances", args[0]), code: exitFailure, silent: asJSON}
			}
			if !r.Verdict {
				why := r.NoVerdict
				if r.Judged { // judged against the reference, yet no case held to a bound
					why = "no case was held to a bound"
				}
				err := fmt.Errorf("%w: %s: %s", check.ErrNoVerdict, args[0], why)
				return &codedError{err: err, code: exitUsage, silent: asJSON} // JSON: no_verdict says it
			}
			return nil
		},
	}
	c.Flags().StringVar(&ref, "reference", "", "the reference: X.safetensors (X.json, else reference.json, beside it), X.json, or their folder (required)")
	c.Flags().BoolVar(&asJSON, "json", false, "print {pass, cases} as JSON")
	backendFlags(c, &lo)
	c.Flags().IntVar(&lo.Workers, "workers", 0, "forward-pass goroutines (0 = all cores)")
	c.Flags().BoolVar(&lo.SkipDigests, "skip-digests", false, "trust the pack's digests instead of verifying them at load")
	return c
}

type parityCaseJSON struct {
	Name        string  `json:"name"`
	MaxAbsErr   float64 `json:"max_abs_err"`
	MeanAbsErr  float64 `json:"mean_abs_err"`
	Cosine      float64 `json:"cosine"`
	ArgmaxAgree float64 `json:"argmax_agree"`
	// Tolerance is absent when the report carries no verdict.
	Tolerance *float64 `json:"tolerance,omitempty"`
	// RefErr is transformers' own float32 error on the tensor (the
	// reference's float32 against its float64 result); absent without one.
	RefErr *float64 `json:"ref_err,omitempty"`
	// Pass is null when the case has no verdict (Judged false).
	Pass   *bool `json:"pass"`
	Judged bool  `json:"judged"`
	// VsCPU is the max abs difference from the CPU runtime (other backends
	// only; absent when it is not finite — the case then fails).
	VsCPU *float64 `json:"max_abs_vs_cpu,omitempty"`
}

func parityJSON(r *check.ParityReport, b check.Bounds) any {
	cases := make([]parityCaseJSON, len(r.Cases))
	for i, c := range r.Cases {
		cases[i] = parityCaseJSON{Name: c.Name, MaxAbsErr: c.MaxAbsErr, MeanAbsErr: c.MeanAbsErr, Cosine: c.Cosine,
			ArgmaxAgree: c.ArgmaxAgree, Pass: verdictJSON(c.Pass, c.Judged), Judged: c.Judged}
		if !math.IsInf(c.Tolerance, 0) {
			v := c.Tolerance
			cases[i].Tolerance = &v
		}
		if c.RefErr >= 0 {
			v := c.RefErr
			cases[i].RefErr = &v
		}
		if c.VsCPU >= 0 && !math.IsInf(c.VsCPU, 0) {
			v := c.VsCPU
			cases[i].VsCPU = &v
		}
	}
	bounds := map[string]float64{"logits": b.Logits, "hidden": b.Hidden, "mismatch": b.Mismatch}
	if r.Backend != "cpu" && !math.IsInf(b.VsCPU, 0) {
		bounds["vs_cpu"] = b.VsCPU // absent: reported, not bounded (bf16 precision)
	}
	out := map[string]any{"pass": verdictJSON(r.Pass, r.Verdict), "backend": r.Backend, "cases": cases, "bounds": bounds,
		"judged": r.Judged, "anchor": r.Anchor}
	if !r.Judged {
		out["no_verdict"] = r.NoVerdict
	}
	return out
}

func renderParity(w io.Writer, r *check.ParityReport, b check.Bounds) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	vs := r.Backend != "cpu"
	own := map[bool]string{true: "bfloat16", false: "float32"}[r.Anchor == "bf16"]
	head := "case\tmax abs err\tmean abs err\tcosine\targmax agree\ttolerance\t" + map[bool]string{true: "bf16", false: "f32"}[r.Anchor == "bf16"] + " ref err\t"
	if vs {
		head += "vs cpu\t"
	}
	fmt.Fprintln(tw, head+"\t")
	for _, c := range r.Cases {
		fmt.Fprintf(tw, "%s\t%.3g\t%.3g\t%.9f\t%.3f\t%s\t%s\t", c.Name, c.MaxAbsErr, c.MeanAbsErr, c.Cosine, c.ArgmaxAgree,
			orDash(c.Tolerance, !math.IsInf(c.Tolerance, 0)), orDash(c.RefErr, c.RefErr >= 0))
		if vs {
			if c.VsCPU >= 0 || c.VsCPU != c.VsCPU {
				fmt.Fprintf(tw, "%.3g\t", c.VsCPU)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintf(tw, "%s\t\n", verdictMark(c.Pass, c.Judged))
	}
	tw.Flush()
	if vs {
		fmt.Fprintf(w, "backend %s; vs cpu: max abs difference from the CPU runtime (bound %.3g)\n", r.Backend, b.VsCPU)
	}
	if r.Anchor == "f64" || r.Anchor == "bf16" {
		fmt.Fprintf(w, "measured against the reference's float64 results; tolerance = %d × transformers' own %s error (ref err), at least 2^-20 of the tensor's magnitude\n", check.F64Multiple, own)
	}
	switch {
	case !r.Judged && vs:
		fmt.Fprintf(w, "reference: no verdict (%s)\nparity vs cpu: %s\n", r.NoVerdict, verdictWord(r.Pass, r.Verdict))
	case !r.Judged && r.Verdict: // a non-finite output fails whatever the verdict
		fmt.Fprintf(w, "parity: FAIL (a non-finite output); no verdict against the reference: %s\n", r.NoVerdict)
	case !r.Judged:
		fmt.Fprintf(w, "parity: no verdict: %s\n", r.NoVerdict)
	default:
		fmt.Fprintf(w, "parity: %s\n", verdictWord(r.Pass, r.Verdict))
	}
}

// verdictJSON is a verdict as JSON: true for a judged pass, false for a
// failure, null (nil) when there is no verdict.
func verdictJSON(pass, judged bool) *bool {
	if !judged {
		return nil
	}
	return &pass
}

// verdictMark is a table row's verdict: ok, FAIL, or - without one.
func verdictMark(pass, judged bool) string {
	switch {
	case !judged:
		return "-"
	case pass:
		return "ok"
	}
	return "FAIL"
}

// verdictWord is a run's verdict: pass, FAIL, or no verdict.
func verdictWord(pass, judged bool) string {
	switch {
	case !judged:
		return "no verdict"
	case pass:
		return "pass"
	}
	return "FAIL"
}

// orDash formats v, or "-" when it does not apply.
func orDash(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
}
