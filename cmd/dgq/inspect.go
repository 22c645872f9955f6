package main

import (
	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

func newInspectCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "inspect PACK [--json]",
		Short: "Describe a pack: format, layout, per-class summary and every tensor",
		Args:  cobra.ExactArgs(1),
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
