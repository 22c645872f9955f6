package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
)

// Rendering shared by several commands: JSON output, the per-class summary
// table, quantize's and audit's reports (demo prints both).

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func renderSummary(w io.Writer, rows []layout.ClassSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tformat\ttensors\tparams\tbytes\tbits/weight\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.3f\t\n", r.Label(), r.Format, r.Tensors, r.Params, r.Bytes, r.BitsPerWeight)
	}
	tw.Flush()
}

func renderQuantize(w io.Writer, o dgq.QuantizeOptions, res *dgq.QuantizeResult) {
	renderSummary(w, res.Summary)
	if o.DryRun {
		fmt.Fprintf(w, "dry run: %d tensors, blob %d bytes, expert_split %s; nothing written\n", len(res.Plan.Entries), res.Plan.BlobSize, splitText(res.Plan.HasExperts, res.Plan.ExpertSplit))
		if why := res.Plan.EngineIncompatibility(); why != "" {
			fmt.Fprintf(w, "dgq-only: the diffgemma engine cannot run this pack: %s\n", why)
		}
		return
	}
	if len(res.Report.Classes) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "class\ttensors\trel RMSE\tmax abs err\t")
		for _, c := range res.Report.Classes {
			fmt.Fprintf(tw, "%s\t%d\t%.4g\t%.4g\t\n", c.Class, c.Tensors, c.RelRMSE, c.MaxAbsErr)
		}
		tw.Flush()
	}
	secs := res.Elapsed.Seconds()
	fmt.Fprintf(w, "wrote %s: %d tensors, %d bytes from %d source bytes in %s (%.1f MB/s of source), version %d, encoder %s\n",
		o.Out, len(res.Manifest.Tensors), res.Manifest.CanonicalSize(), res.SourceBytes, res.Elapsed.Round(time.Millisecond),
		float64(res.SourceBytes)/1e6/max(secs, 1e-9), res.Manifest.Version, o.Encoder)
	if why := res.Manifest.DGQ.DGQOnly; why != "" {
		fmt.Fprintf(w, "dgq-only: the diffgemma engine cannot run this pack: %s\n", why)
	}
	if o.ReportPath != "" {
		fmt.Fprintf(w, "report: %s\n", o.ReportPath)
	}
}

func renderAudit(w io.Writer, dir string, rep *dgq.AuditReport) {
	if rep.OK {
		for _, f := range rep.Findings {
			fmt.Fprintf(w, "  note: %s\n", f)
		}
		if len(rep.Findings) > 0 {
			fmt.Fprintf(w, "audit %s: ok (every rule checked; see the notes)\n", dir)
			return
		}
		fmt.Fprintf(w, "audit %s: ok (every rule and every digest checked)\n", dir)
		return
	}
	fmt.Fprintf(w, "audit %s: %d problem(s)\n", dir, len(rep.Findings))
	for _, f := range rep.Findings {
		fmt.Fprintf(w, "  %s\n", f)
	}
}

// splitText is an expert split, or "none".
func splitText(ok bool, v any) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(v)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
