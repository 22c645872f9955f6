package main

import (
	"errors"

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
experts nvfp4). --set class=format (repeatable) overrides a class: experts, experts.gate_up,
experts.down, attn, dense, sc, vision; formats raw, q8, q4, q5, q6, nvfp4. embed, router, norm,
layer_scalar and the other vision tensors are locked to raw. --encoder search (default) minimizes each
tensor's error within the same bytes; --encoder minmax reproduces the engine's own encoders byte for
byte. Every refusal happens before the output exists.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = newProgress(e)
			m, err := codecs.ParseMethod(encoder)
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
	f.StringArrayVar(&o.Sets, "set", nil, "override a class: class=format (repeatable)")
	f.StringVarP(&o.Source, "model", "m", "", "source: a snapshot directory, or ORG/NAME[@REVISION] in the Hugging Face cache (required)")
	f.StringVarP(&o.Out, "out", "o", "", "output pack directory (required unless --dry-run)")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the per-class plan (tensors, parameters, bytes, bits per weight) and write nothing")
	f.StringVar(&o.ReportPath, "report", "", "write per-tensor relative RMSE and max abs error as JSON to this file")
	f.BoolVar(&o.Force, "force", false, "replace an existing pack at the output path")
	f.BoolVar(&o.Overlay, "overlay", false, "write a layered pack whose raw tensors reference the source's Hugging Face shards")
	f.IntVar(&o.Workers, "workers", 0, "encoding goroutines (0 = all cores)")
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
