package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

func newInspectCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "inspect PACK [--json]",
		Short: "Describe a pack: format, layout, per-class summary and every tensor",
		Long: `inspect prints what a pack's manifest says: its version and where it runs (dgq and the diffgemma
engine, dgq alone, or nothing for a version neither knows), profile, overrides, blob and expert split, a
layered pack's external files, the per-class summary (tensors, parameters, bytes, bits per weight), every
tensor, and the structural rule violations (a missing, empty or truncated blob among them).

It reads the manifest and the blob's size, nothing of the weights: no digest is checked (dgq audit does).
PACK is a pack folder or ORG/NAME[@REV] in the Hugging Face hub cache.

Exit codes: 0 the manifest was read (rule violations are listed, not fatal); 2 usage; 3 not a pack (no or a
malformed model.dgq.json); 4 a pack in the hub cache that is not there (the message gives the dgq download).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := dgq.Inspect(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, info)
			}
			renderInspect(e.stdout, args[0], info)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

func renderInspect(w io.Writer, dir string, info *dgq.PackInfo) {
	fmt.Fprintf(w, "pack %s\n", dir)
	gen := info.Generator
	if gen == "" {
		gen = "not dgq (no dgq object)"
	}
	fmt.Fprintf(w, "  version %d, profile %s (manifest %s), generator %s, layered %v\n", info.FormatVersion, info.Profile, info.ManifestProfile, gen, info.Layered)
	fmt.Fprintf(w, "  runs on: %s\n", runsOnText(info))
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
	if n := len(info.Findings); n > 0 {
		fmt.Fprintf(w, "  %s (dgq audit %s checks everything):\n", plural(n, "rule violation", "rule violations"), dir)
		for _, f := range info.Findings {
			fmt.Fprintf(w, "    %s\n", f)
		}
	}
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
	if n := len(info.Findings); n > 0 {
		fmt.Fprintf(w, "%s (listed above); run dgq audit %s for details\n", plural(n, "rule violation", "rule violations"), dir)
	}
}

func optText(p *int64) string {
	if p == nil {
		return "?"
	}
	return fmt.Sprint(*p)
}
