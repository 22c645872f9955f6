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

type parityCaseJSON struct {
	Name        string  `json:"name"`
	MaxAbsErr   float64 `json:"max_abs_err"`
	MeanAbsErr  float64 `json:"mean_abs_err"`
	Cosine      float64 `json:"cosine"`
	ArgmaxAgree float64 `json:"argmax_agree"`
	Tolerance   float64 `json:"tolerance"`
	Pass        bool    `json:"pass"`
	// VsCPU is the max abs difference from the CPU runtime (other backends
	// only; absent when it is not finite — the case then fails).
	VsCPU *float64 `json:"max_abs_vs_cpu,omitempty"`
}

func parityJSON(r *check.ParityReport, b check.Bounds) any {
	cases := make([]parityCaseJSON, len(r.Cases))
	for i, c := range r.Cases {
		cases[i] = parityCaseJSON{c.Name, c.MaxAbsErr, c.MeanAbsErr, c.Cosine, c.ArgmaxAgree, c.Tolerance, c.Pass, nil}
		if c.VsCPU >= 0 && !math.IsInf(c.VsCPU, 0) {
			v := c.VsCPU
			cases[i].VsCPU = &v
		}
	}
	bounds := map[string]float64{"logits": b.Logits, "hidden": b.Hidden, "mismatch": b.Mismatch}
	if r.Backend != "cpu" && !math.IsInf(b.VsCPU, 0) {
		bounds["vs_cpu"] = b.VsCPU // absent: reported, not bounded (bf16 precision)
	}
	return map[string]any{"pass": r.Pass, "backend": r.Backend, "cases": cases, "bounds": bounds}
}

func renderParity(w io.Writer, r *check.ParityReport, b check.Bounds) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	vs := r.Backend != "cpu"
	head := "case\tmax abs err\tmean abs err\tcosine\targmax agree\ttolerance\t"
	if vs {
		head += "vs cpu\t"
	}
	fmt.Fprintln(tw, head+"\t")
	for _, c := range r.Cases {
		fmt.Fprintf(tw, "%s\t%.3g\t%.3g\t%.9f\t%.3f\t%.3g\t", c.Name, c.MaxAbsErr, c.MeanAbsErr, c.Cosine, c.ArgmaxAgree, c.Tolerance)
		if vs {
			if c.VsCPU >= 0 || c.VsCPU != c.VsCPU {
				fmt.Fprintf(tw, "%.3g\t", c.VsCPU)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintf(tw, "%s\t\n", map[bool]string{true: "ok", false: "FAIL"}[c.Pass])
	}
	tw.Flush()
	if vs {
		fmt.Fprintf(w, "backend %s; vs cpu: max abs difference from the CPU runtime (bound %.3g)\n", r.Backend, b.VsCPU)
	}
	fmt.Fprintf(w, "parity: %s\n", map[bool]string{true: "pass", false: "FAIL"}[r.Pass])
}
