package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
)

// Rendering shared by several commands: JSON output, the per-class summary
// table, quantize's and audit's reports (demo prints both).

// writeJSON prints v as one indented JSON document. <, > and & are written
// as themselves, not as \u003c…: the output is read by programs and people,
// never embedded in HTML, and tokens such as <bos> must read as they are.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil { // Encode ends the document with a newline
		return err
	}
	_, err := w.Write(buf.Bytes())
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
		weighted := res.Report.Imatrix != nil
		if weighted {
			fmt.Fprintln(tw, "class\ttensors\trel RMSE\tweighted\tmax abs err\t")
		} else {
			fmt.Fprintln(tw, "class\ttensors\trel RMSE\tmax abs err\t")
		}
		for _, c := range res.Report.Classes {
			if weighted {
				wr := "-"
				if c.WeightedRelRMSE != nil {
					wr = fmt.Sprintf("%.4g", *c.WeightedRelRMSE)
				}
				fmt.Fprintf(tw, "%s\t%d\t%.4g\t%s\t%.4g\t\n", c.Class, c.Tensors, c.RelRMSE, wr, c.MaxAbsErr)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.4g\t%.4g\t\n", c.Class, c.Tensors, c.RelRMSE, c.MaxAbsErr)
		}
		tw.Flush()
	}
	if im := res.Report.Imatrix; im != nil {
		mats, tensors := 0, 0
		for _, t := range res.Report.Tensors {
			if t.ImatrixUnreached > 0 {
				mats += t.ImatrixUnreached
				tensors++
			}
		}
		fmt.Fprintf(w, "imatrix %s (sha256 %s)", o.Imatrix, im.SHA256[:12])
		if mats > 0 {
			fmt.Fprintf(w, "; %s of %s had no calibration rows and kept uniform weights (the report lists them)", plural(mats, "matrix", "matrices"), plural(tensors, "tensor", "tensors"))
		}
		fmt.Fprintln(w)
	}
	for _, dir := range res.RemovedStaging {
		fmt.Fprintf(w, "removed %s: the staging folder of a run that was killed\n", dir)
	}
	secs := res.Elapsed.Seconds()
	m := res.Manifest
	written := fmt.Sprintf("%s (%d bytes)", humanBytes(m.CanonicalSize()), m.CanonicalSize())
	if m.Layered() {
		local := m.StoredBlobSize()
		written = fmt.Sprintf("layered: own blob %s (%d bytes) written, canonical size %d bytes with %s of the base",
			humanBytes(local), local, m.CanonicalSize(), plural(len(m.ExternalFiles), "shard", "shards"))
	}
	fmt.Fprintf(w, "wrote %s: %s, %s from %s of source in %s (%.1f MB/s of source), version %d, encoder %s\n",
		o.Out, plural(len(m.Tensors), "tensor", "tensors"), written, humanBytes(res.SourceBytes), res.Elapsed.Round(time.Millisecond),
		float64(res.SourceBytes)/1e6/max(secs, 1e-9), m.Version, o.Encoder)
	if why := res.Manifest.DGQ.DGQOnly; why != "" {
		fmt.Fprintf(w, "dgq-only: the diffgemma engine cannot run this pack: %s\n", why)
	}
	if o.ReportPath != "" {
		fmt.Fprintf(w, "report: %s\n", o.ReportPath)
	}
}

// renderAudit prints an audit's findings and a last line saying what was
// checked: every rule, every digest (or the notes saying why not) and, with
// --deep, every tensor decoded and found finite.
func renderAudit(w io.Writer, dir string, rep *dgq.AuditReport, deep bool) {
	if rep.OK {
		for _, f := range rep.Findings {
			fmt.Fprintf(w, "  note: %s\n", f)
		}
		checked := "every rule and every digest checked"
		if len(rep.Findings) > 0 {
			checked = "every rule checked; see the notes"
		}
		if deep {
			checked += "; --deep: every tensor decoded, every value finite"
		}
		fmt.Fprintf(w, "audit %s: ok (%s)\n", dir, checked)
		return
	}
	deepNote := ""
	if deep {
		deepNote = ", every tensor decoded (--deep)"
	}
	fmt.Fprintf(w, "audit %s: %s%s\n", dir, plural(len(rep.Findings), "problem", "problems"), deepNote)
	for _, f := range rep.Findings {
		fmt.Fprintf(w, "  %s\n", f)
	}
}

// runsOnText is where a pack runs, in words: "dgq, diffgemma", "dgq", or
// why nothing runs it.
func runsOnText(info *dgq.PackInfo) string {
	if len(info.RunsOn) == 0 {
		return fmt.Sprintf("nothing (version %d is neither the engine's 1-4 nor dgq's 1000)", info.FormatVersion)
	}
	return strings.Join(info.RunsOn, ", ")
}

// humanBytes is a size for people: bytes below 1 KiB, else KiB, MiB, GiB
// or TiB with three significant digits (1.05 MiB, 13.6 GiB, 512 KiB).
func humanBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	unit := ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v, unit = v/1024, u
		if math.Abs(v) < 1024 {
			break
		}
	}
	switch a := math.Abs(v); {
	case a < 9.995:
		return fmt.Sprintf("%.2f %s", v, unit)
	case a < 99.95:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

// plural is "1 layer", "0 layers", "2 layers".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
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
