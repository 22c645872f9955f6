package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/overlay"
)

func newRepackCmd(e *env) *cobra.Command {
	var (
		o                 overlay.RepackOptions
		toOverlay, toMono bool
	)
	c := &cobra.Command{
		Use:   "repack (--overlay | --monolithic) -m PACK -o OUT",
		Short: "Split a pack into a layered overlay on its Hugging Face base, or flatten a layered pack",
		Long: `repack --overlay turns a self-contained pack into a layered one: every raw tensor that is
byte-identical to the Hugging Face base snapshot becomes a reference into the base's shards (a tensor that
differs is kept locally and reported). The base comes from the pack's recorded source or --hf-repo and
--hf-revision. repack --monolithic flattens a layered pack into a self-contained one at canonical offsets,
streaming, without requantizing.`,
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
	return c
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
