package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/overlay"
)

func newRepackCmd(e *env) *cobra.Command {
	var (
		o                         overlay.RepackOptions
		toOverlay, toMono, asJSON bool
	)
	c := &cobra.Command{
		Use:   "repack (--overlay | --monolithic) -m PACK -o OUT [--hf-repo ORG/NAME] [--hf-revision REV] [--force] [--json]",
		Short: "Split a pack into a layered overlay on its Hugging Face base, or flatten a layered pack",
		Long: `repack --overlay turns a self-contained pack into a layered one: every raw tensor that is
byte-identical to the Hugging Face base snapshot becomes a reference into the base's shards (a tensor that
differs is kept locally and reported). The base comes from the pack's recorded source or --hf-repo and
--hf-revision. repack --monolithic flattens a layered pack into a self-contained one at canonical offsets,
streaming, without requantizing.

It reads the pack (every digest verified while streaming) and the base's shards in the Hugging Face cache.

The base must be the pack's model: its config.json equal to the pack's, every raw tensor of the pack that it
holds of the same shape and dtype, and at least one held; --hf-repo naming another repo than the recorded one
needs --hf-revision.

Exit codes: 0; 1 a pack of the wrong kind (--overlay of a layered pack, --monolithic of a self-contained one);
2 usage (not exactly one of --overlay and --monolithic, no -m or -o, an OUT that exists without --force, a base
that is incomplete or not the pack's model: the message names the flag or the first mismatch); 3 not a pack,
or a pack that fails its checks; 4 the base or a pinned shard is not in the cache (the message gives the dgq
download); 5 I/O; 130 interrupted (143 by SIGTERM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if toOverlay == toMono {
				return usageErr(fmt.Errorf("repack: give exactly one of --overlay and --monolithic"))
			}
			if o.Pack == "" || o.Out == "" {
				return usageErr(fmt.Errorf("repack: -m PACK and -o OUT are required"))
			}
			o.Progress = newProgress(e)
			repack := overlay.RepackMonolithic
			if toOverlay {
				repack = overlay.RepackOverlay
			}
			res, err := repack(e.ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, repackJSON(o.Out, res))
			}
			renderRepack(e.stdout, o.Out, res)
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&toOverlay, "overlay", false, "split a self-contained pack into a layered overlay")
	f.BoolVar(&toMono, "monolithic", false, "flatten a layered pack into a self-contained one")
	f.StringVarP(&o.Pack, "model", "m", "", "input pack directory (required)")
	f.StringVarP(&o.Out, "out", "o", "", "output pack directory (required)")
	f.StringVar(&o.HFRepo, "hf-repo", "", "base repository ORG/NAME (default: the pack's recorded source)")
	f.StringVar(&o.HFRevision, "hf-revision", "", "base revision: branch, tag or commit (default: the pack's recorded source)")
	f.BoolVar(&o.Force, "force", false, "replace an existing pack at the output path")
	f.BoolVar(&asJSON, "json", false, "print the result (or the error) as one JSON object")
	return c
}

// repackResult is repack --json's output.
type repackResult struct {
	Out           string         `json:"out"`
	Layered       bool           `json:"layered"`
	Tensors       int            `json:"tensors"`
	ExternalFiles int            `json:"external_files"`
	LocalBlobSize int64          `json:"local_blob_size"`
	BlobSize      int64          `json:"blob_size"`
	BaseModel     *dgq.BaseModel `json:"base_model"`
	Mismatched    []string       `json:"mismatched"`
}

func repackJSON(out string, res *overlay.RepackResult) repackResult {
	m := res.Manifest
	return repackResult{Out: out, Layered: m.Layered(), Tensors: len(m.Tensors), ExternalFiles: len(m.ExternalFiles),
		LocalBlobSize: res.LocalBytes, BlobSize: m.CanonicalSize(), BaseModel: m.BaseModel, Mismatched: append([]string{}, res.Mismatched...)}
}

func renderRepack(w io.Writer, out string, res *overlay.RepackResult) {
	layered := "self-contained"
	if res.Manifest.Layered() {
		layered = fmt.Sprintf("layered (%d external files)", len(res.Manifest.ExternalFiles))
	}
	fmt.Fprintf(w, "wrote %s: %s, %s, own blob %s (%d bytes; canonical %d)\n", out, layered, plural(len(res.Manifest.Tensors), "tensor", "tensors"),
		humanBytes(res.LocalBytes), res.LocalBytes, res.Manifest.CanonicalSize())
	for _, n := range res.Mismatched {
		fmt.Fprintf(w, "  stored locally (differs from the base snapshot): %s\n", n)
	}
}
