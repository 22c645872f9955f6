package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/overlay"
	"github.com/dgq-dev/dgq/runtime/check"
)

var (
	errMissingOut  = errors.New("quantize: -o OUT is required (or use --dry-run)")
	errAuditFailed = errors.New("demo: the audit of the fresh pack found problems")
)

func versionString() string {
	v := dgq.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}

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

func renderInspect(w io.Writer, dir string, info *dgq.PackInfo) {
	fmt.Fprintf(w, "pack %s\n", dir)
	gen := info.Generator
	if gen == "" {
		gen = "not dgq (no dgq object)"
	}
	fmt.Fprintf(w, "  version %d, profile %s (manifest %s), generator %s, layered %v\n", info.FormatVersion, info.Profile, info.ManifestProfile, gen, info.Layered)
	fmt.Fprintf(w, "  runs on: %s\n", strings.Join(info.RunsOn, ", "))
	if info.DGQOnly != "" {
		fmt.Fprintf(w, "  dgq-only: %s\n", info.DGQOnly)
	}
	for _, o := range info.Overrides {
		fmt.Fprintf(w, "  override %s=%s\n", o.Target, o.Format)
	}
	for _, k := range slices.Sorted(maps.Keys(info.CustomClasses)) {
		fmt.Fprintf(w, "  custom class %s: %s\n", k, info.CustomClasses[k])
	}
	fmt.Fprintf(w, "  blob %s: %d bytes, expert_split %s\n", info.Blob, info.BlobSize, splitText(info.ExpertSplit != nil, deref(info.ExpertSplit)))
	if info.Layered {
		fmt.Fprintf(w, "  layered: local blob %s bytes, local expert tail from %s; %d external files\n", optText(info.LocalBlobSize), optText(info.LocalExpertSplit), len(info.ExternalFiles))
		for _, f := range info.ExternalFiles {
			fmt.Fprintf(w, "    %s %s %s@%s/%s (%d bytes, header sha256 %.12s)\n", f.ID, f.Role, f.Repo, f.Revision, f.Path, f.Size, f.HeaderSHA256)
		}
	}
	if info.SourceModel != "" {
		fmt.Fprintf(w, "  source %s\n", info.SourceModel)
	}
	renderSummary(w, info.Summary)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "offset\tsize\tclass\tformat\tdtype\tshape\tsource\tname")
	for _, t := range info.Tensors {
		src := "-"
		if t.Source != nil {
			src = fmt.Sprintf("%s@%d", t.Source.Kind, t.Source.Offset)
			if t.Source.File != "" {
				src = fmt.Sprintf("%s:%d", t.Source.File, t.Source.Offset)
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%v\t%s\t%s\n", t.Offset, t.Size, t.Class, t.Format, t.DType, t.Shape, src, t.Name)
	}
	tw.Flush()
	if len(info.Findings) > 0 {
		fmt.Fprintf(w, "%d rule violation(s); run dgq audit %s for details\n", len(info.Findings), dir)
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

func optText(p *int64) string {
	if p == nil {
		return "?"
	}
	return fmt.Sprint(*p)
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

func renderRepack(w io.Writer, out string, res *overlay.RepackResult) {
	layered := "self-contained"
	if res.Manifest.Layered() {
		layered = fmt.Sprintf("layered (%d external files)", len(res.Manifest.ExternalFiles))
	}
	fmt.Fprintf(w, "wrote %s: %s, %d tensors, own blob %d bytes (canonical %d)\n", out, layered, len(res.Manifest.Tensors), res.LocalBytes, res.Manifest.CanonicalSize())
	for _, n := range res.Mismatched {
		fmt.Fprintf(w, "  stored locally (differs from the base snapshot): %s\n", n)
	}
}

// quantizeResult is quantize --json's output.
type quantizeResult struct {
	DryRun      bool                  `json:"dry_run"`
	Out         string                `json:"out,omitempty"`
	Profile     string                `json:"profile"`
	Layered     bool                  `json:"layered"`
	Tensors     int                   `json:"tensors"`
	BlobSize    int64                 `json:"blob_size"`
	ExpertSplit *int64                `json:"expert_split"`
	Version     int                   `json:"version,omitempty"`
	Encoder     string                `json:"encoder"`
	RunsOn      []string              `json:"runs_on"`
	DGQOnly     string                `json:"dgq_only,omitempty"`
	SourceBytes int64                 `json:"source_bytes"`
	ElapsedS    float64               `json:"elapsed_s"`
	Summary     []layout.ClassSummary `json:"summary"`
	Classes     []dgq.ClassReport     `json:"classes,omitempty"`
	Report      string                `json:"report,omitempty"`
}

func quantizeJSON(o dgq.QuantizeOptions, res *dgq.QuantizeResult) quantizeResult {
	r := quantizeResult{
		DryRun: o.DryRun, Profile: string(res.Plan.Profile), Layered: o.Overlay, Tensors: len(res.Plan.Entries),
		BlobSize: res.Plan.BlobSize, SourceBytes: res.SourceBytes, Encoder: o.Encoder.String(),
		ElapsedS: res.Elapsed.Seconds(), Summary: res.Summary, Report: o.ReportPath, RunsOn: []string{"dgq", "diffgemma"},
		DGQOnly: res.Plan.EngineIncompatibility(),
	}
	if r.DGQOnly != "" {
		r.RunsOn = []string{"dgq"}
	}
	if res.Plan.HasExperts {
		split := res.Plan.ExpertSplit
		r.ExpertSplit = &split
	}
	if !o.DryRun {
		r.Out = o.Out
		r.Classes = res.Report.Classes
		r.Version = res.Manifest.Version
	}
	return r
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

func renderSmoke(w io.Writer, dir string, r *check.SmokeReport) {
	fmt.Fprintf(w, "smoke %s\n", dir)
	for _, c := range r.Checks {
		status := map[bool]string{true: "ok  ", false: "FAIL"}[c.Pass]
		if c.Skipped {
			status = "skip"
		}
		fmt.Fprintf(w, "  %s %-24s %s\n", status, c.Name, c.Detail)
	}
	fmt.Fprintf(w, "  load %.2fs, prefill %.0f tokens/s, denoise step %.1f ms\n", r.LoadSeconds, r.PrefillTokensPerSec, r.DenoiseStepMillis)
	fmt.Fprintf(w, "smoke: %s\n", map[bool]string{true: "pass", false: "FAIL"}[r.Pass])
}
