package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

func newCardCmd(e *env) *cobra.Command {
	var (
		o      dgq.CardOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "card PACK [--verify REPORT.json] [--repo ORG/NAME] [--base-model ORG/NAME[@REV]] [-o FILE] [--force] [--json]",
		Short: "Write a Hugging Face model card (README.md) into a pack",
		Long: `card writes PACK/README.md, the model card the Hugging Face Hub shows: metadata naming the base model
(base_model_relation: quantized, its licence when its card is in the hub cache), what the pack is, its per-class
formats, sizes and bits per weight, and how to run it with dgq and with the diffgemma engine. --verify adds the
numbers of a dgq verify --json report of this pack. A README.md that dgq card did not write is replaced only with
--force. The same pack and report give the same bytes.

It reads the manifest (none of the blob), the base model's README.md in the hub cache for its licence, and
the --verify report; it writes PACK/README.md or -o FILE.

Exit codes: 0; 2 usage (a README.md not written by dgq card without --force, an output in the Hugging Face
cache, a --repo or --base-model that is malformed or names another model, a report of another pack); 3 not a
pack, a pack that breaks a rule, no base model recorded or given, a --verify file that is not a report; 5 I/O.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Pack = args[0]
			res, err := dgq.Card(o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, res)
			}
			fmt.Fprintln(e.stdout, res.Path)
			for _, n := range res.Notes {
				fmt.Fprintf(e.stdout, "note: %s\n", n)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.VerifyReport, "verify", "", "include this dgq verify --json report of the pack")
	f.StringVar(&o.BaseModel, "base-model", "", "ORG/NAME[@REV] of the base model, for a pack that records none (quantized from a folder outside the hub cache)")
	f.StringVar(&o.Repo, "repo", "", "the Hugging Face repo id the pack is published as, used in the card's commands (default: the placeholder ORG/NAME)")
	f.BoolVar(&o.Force, "force", false, "replace a README.md that dgq card did not write")
	f.StringVarP(&o.Out, "out", "o", "", "write the card to this file instead of PACK/README.md (needed for a pack in the Hugging Face cache)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}
