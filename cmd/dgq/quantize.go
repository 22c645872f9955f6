package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
)

var errMissingOut = errors.New("quantize: -o OUT is required (or use --dry-run)")

func newQuantizeCmd(e *env) *cobra.Command {
	var (
		o       dgq.QuantizeOptions
		asJSON  bool
		encoder string
	)
	c := &cobra.Command{
		Use:   "quantize --profile P -m SNAPSHOT_DIR|ORG/NAME[@REV] -o OUT [--set class=format ...] [--overlay]",
		Short: "Quantize a Hugging Face snapshot into a self-contained .dgq pack",
		Long: `quantize streams a DiffusionGemma snapshot (config.json + safetensors shards) into a pack in one pass.

The pack is in the .dgq format of the diffgemma engine (mmastrac/diffgemma): the engine runs it unless
it is dgq-only (bf16 and q5 profiles, or a --set the engine has no kernel for), which quantize says.

Profiles: bf16 (nothing quantized, dgq-only), q4, q6 (experts in that format, sc q8), q5 (a real 5-bit
format, dgq-only), nvfp4 (experts, attn, dense and vision linears in nvfp4, sc q8), nvfp4x (q4 with
experts nvfp4). --set class=format (repeatable, or several separated by commas: --set attn=q8,dense=q8)
overrides a class: experts, experts.gate_up, experts.down (the two expert stacks may differ: the pack is then
dgq-only), attn, dense, sc, vision; formats raw (also bf16), q8, q4, q5, q6, nvfp4. Names are
case-insensitive. embed, router, norm, layer_scalar and the other vision tensors are locked to raw.
--encoder search (default) minimizes each tensor's error within the same bytes; --encoder minmax reproduces
the engine's own encoders byte for byte. --imatrix FILE (made by dgq calibrate from the same model) weights the
search's error by how large each input column's inputs were on the calibration text: same formats and bytes,
the manifest records the file's SHA-256, the report gives the weighted error beside the plain one. Every refusal happens before the output exists. Staging folders
left in OUT's parent by killed runs are removed (quantize names them).

It reads the snapshot's config.json, safetensors headers and weights, and its side files (tokenizer,
generation config); it writes OUT (and --report FILE).

Exit codes: 0; 2 usage (a bad profile, --set or --encoder, an OUT that exists without --force, an OUT or
--report in a forbidden place, an existing --report without --force or one that is not a previous report); 3 an invalid snapshot (config, headers, tensors, non-finite values, a shape a
format cannot hold; an --imatrix that is missing, malformed or made from another model); 4 a repo or revision not in the hub cache; 5 I/O (a full disk); 130 interrupted (143 by SIGTERM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = newProgress(e)
			m, err := codecs.ParseMethod(strings.ToLower(strings.TrimSpace(encoder)))
			if err != nil {
				return err
			}
			o.Encoder = m
			res, err := dgq.Quantize(e.ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, quantizeJSON(o, res))
			}
			renderQuantize(e.stdout, o, res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Profile, "profile", "", "quantization profile: bf16, q4, q5, q6, nvfp4, nvfp4x (required)")
	f.StringArrayVar(&o.Sets, "set", nil, "override a class: class=format (repeatable, or comma-separated)")
	f.StringVarP(&o.Source, "model", "m", "", "source: a snapshot directory, or ORG/NAME[@REVISION] in the Hugging Face cache (required)")
	f.StringVarP(&o.Out, "out", "o", "", "output pack directory (required unless --dry-run)")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the per-class plan (tensors, parameters, bytes, bits per weight) and write nothing")
	f.StringVar(&o.ReportPath, "report", "", "write per-tensor relative RMSE and max abs error as JSON to this file")
	f.BoolVar(&o.Force, "force", false, "replace an existing pack at the output path, and a previous --report file")
	f.BoolVar(&o.Overlay, "overlay", false, "write a layered pack whose raw tensors reference the source's Hugging Face shards")
	f.IntVar(&o.Workers, "workers", 0, "encoding goroutines (0 = all cores)")
	f.StringVar(&o.Imatrix, "imatrix", "", "importance matrix (dgq calibrate): the search minimizes the error weighted by each input column's mean square input")
	f.StringVar(&encoder, "encoder", "search", "search (least error for the bytes) or minmax (the engine's own encoders, byte for byte)")
	f.BoolVar(&asJSON, "json", false, "print the result (or the error) as one JSON object")
	_ = c.MarkFlagRequired("profile")
	_ = c.MarkFlagRequired("model")
	c.PreRunE = func(*cobra.Command, []string) error {
		if !o.DryRun && o.Out == "" {
			return usageErr(errMissingOut)
		}
		return nil
	}
	return c
}

// quantizeResult is quantize --json's output.
type quantizeResult struct {
	DryRun   bool   `json:"dry_run"`
	Out      string `json:"out,omitempty"`
	Profile  string `json:"profile"`
	Layered  bool   `json:"layered"`
	Tensors  int    `json:"tensors"`
	BlobSize int64  `json:"blob_size"`
	// LocalBlobSize is the bytes a layered pack's own blob holds (what was
	// written); absent for a self-contained pack and a dry run.
	LocalBlobSize *int64                `json:"local_blob_size,omitempty"`
	ExpertSplit   *int64                `json:"expert_split"`
	Version       int                   `json:"version,omitempty"`
	Encoder       string                `json:"encoder"`
	RunsOn        []string              `json:"runs_on"`
	DGQOnly       string                `json:"dgq_only,omitempty"`
	SourceBytes   int64                 `json:"source_bytes"`
	ElapsedS      float64               `json:"elapsed_s"`
	Summary       []layout.ClassSummary `json:"summary"`
	Classes       []dgq.ClassReport     `json:"classes,omitempty"`
	Report        string                `json:"report,omitempty"`
	// Imatrix is the importance matrix the search was weighted with;
	// absent without one.
	Imatrix *dgq.ImatrixRef `json:"imatrix,omitempty"`
	// RemovedStaging lists the staging folders of killed runs removed from
	// OUT's parent folder; absent when none.
	RemovedStaging []string `json:"removed_staging,omitempty"`
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
		r.Imatrix = res.Report.Imatrix
		r.Version = res.Manifest.Version
		r.RemovedStaging = res.RemovedStaging
		if res.Manifest.Layered() {
			local := res.Manifest.StoredBlobSize()
			r.LocalBlobSize = &local
		}
	}
	return r
}
