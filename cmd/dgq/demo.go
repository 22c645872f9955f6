package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
)

var errAuditFailed = errors.New("demo: the audit of the fresh pack found problems")

func newDemoCmd(e *env) *cobra.Command {
	var (
		o      dgq.DemoOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "demo [--profile P] [--set class=format ...] [-o OUT] [--force] [--json]",
		Short: "Quantize the embedded tiny DiffusionGemma checkpoint, then inspect and audit the pack",
		Long: `demo runs the main job end to end with nothing to download: it writes the tiny DiffusionGemma
checkpoint built into dgq (made by transformers, random weights) to a temporary folder, quantizes it with
--profile (default q4) and --set as dgq quantize does, then inspects and audits the pack.

It reads nothing but the binary. Without -o the pack is made in a temporary folder and removed at the end,
with everything else demo made (the last line says so); with -o OUT the pack stays at OUT.

Exit codes: 0 the pack audits clean; 2 usage (a bad profile or --set, an OUT that exists without --force);
3 the audit of the fresh pack found problems; 5 I/O; 130 interrupted (143 by SIGTERM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = newProgress(e)
			res, err := dgq.Demo(e.ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, demoJSON(res)); err != nil {
					return err
				}
			} else {
				renderDemo(e.stdout, res)
			}
			if !res.Audit.OK {
				return &codedError{err: errAuditFailed, code: exitInvalid, silent: asJSON} // JSON: audit.ok says it
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.Profile, "profile", "q4", "quantization profile")
	c.Flags().StringArrayVar(&o.Sets, "set", nil, "override a class: class=format (repeatable, or comma-separated)")
	c.Flags().StringVarP(&o.Out, "out", "o", "", "pack directory to keep (default: a temporary folder, removed at the end)")
	c.Flags().BoolVar(&o.Force, "force", false, "replace an existing pack at the output path")
	c.Flags().BoolVar(&asJSON, "json", false, "print the result (or the error) as one JSON object")
	return c
}

// demoResult is demo --json's output.
type demoResult struct {
	Source   string                `json:"source"`
	Out      string                `json:"out"`
	Kept     bool                  `json:"kept"`
	Profile  string                `json:"profile"`
	Tensors  int                   `json:"tensors"`
	BlobSize int64                 `json:"blob_size"`
	RunsOn   []string              `json:"runs_on"`
	DGQOnly  string                `json:"dgq_only,omitempty"`
	Summary  []layout.ClassSummary `json:"summary"`
	Audit    *dgq.AuditReport      `json:"audit"`
	ElapsedS float64               `json:"elapsed_s"`
}

func demoJSON(res *dgq.DemoResult) demoResult {
	return demoResult{Source: res.Source, Out: res.Out, Kept: res.Kept, Profile: res.Inspect.Profile, Tensors: len(res.Inspect.Tensors),
		BlobSize: res.Inspect.BlobSize, RunsOn: res.Inspect.RunsOn, DGQOnly: res.Inspect.DGQOnly, Summary: res.Inspect.Summary,
		Audit: res.Audit, ElapsedS: res.Quantize.Elapsed.Seconds()}
}

func renderDemo(w io.Writer, res *dgq.DemoResult) {
	fmt.Fprintf(w, "== quantize: %s -> %s\n", res.Source, res.Out)
	renderQuantize(w, dgq.QuantizeOptions{Out: res.Out}, res.Quantize)
	fmt.Fprintln(w, "\n== inspect")
	renderSummary(w, res.Inspect.Summary)
	fmt.Fprintf(w, "%d tensors, blob %s, expert_split %s, runs on %s\n", len(res.Inspect.Tensors), humanBytes(res.Inspect.BlobSize),
		splitText(res.Inspect.ExpertSplit != nil, deref(res.Inspect.ExpertSplit)), runsOnText(res.Inspect))
	fmt.Fprintln(w, "\n== audit")
	renderAudit(w, res.Out, res.Audit, false)
	if res.Kept {
		fmt.Fprintf(w, "\nthe pack is at %s\n", res.Out)
	} else {
		fmt.Fprintln(w, "\nthe pack was made in a temporary folder and removed; give -o DIR to keep it")
	}
}
