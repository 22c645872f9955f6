package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

var errAuditFailed = errors.New("demo: the audit of the fresh pack found problems")

func newDemoCmd(e *env) *cobra.Command {
	var o dgq.DemoOptions
	c := &cobra.Command{
		Use:   "demo [--profile P] [-o OUT]",
		Short: "Quantize the embedded tiny DiffusionGemma checkpoint, then inspect and audit the pack",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = newProgress(e)
			res, err := dgq.Demo(e.ctx, o)
			if err != nil {
				return err
			}
			renderDemo(e.stdout, res)
			if !res.Audit.OK {
				return &codedError{err: errAuditFailed, code: exitInvalid}
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.Profile, "profile", "q4", "quantization profile")
	c.Flags().StringArrayVar(&o.Sets, "set", nil, "override a class: class=format (repeatable)")
	c.Flags().StringVarP(&o.Out, "out", "o", "", "pack directory (default: a new temporary directory)")
	c.Flags().BoolVar(&o.Force, "force", false, "replace an existing pack at the output path")
	return c
}

func renderDemo(w io.Writer, res *dgq.DemoResult) {
	fmt.Fprintf(w, "== quantize: %s -> %s\n", res.Source, res.Out)
	renderQuantize(w, dgq.QuantizeOptions{Out: res.Out}, res.Quantize)
	fmt.Fprintln(w, "\n== inspect")
	renderSummary(w, res.Inspect.Summary)
	fmt.Fprintf(w, "%d tensors, blob %d bytes, expert_split %s, runs on %s\n", len(res.Inspect.Tensors), res.Inspect.BlobSize,
		splitText(res.Inspect.ExpertSplit != nil, deref(res.Inspect.ExpertSplit)), strings.Join(res.Inspect.RunsOn, ", "))
	fmt.Fprintln(w, "\n== audit")
	renderAudit(w, res.Out, res.Audit)
}
