package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/session"
)

func newTokenizeCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "tokenize TOKENIZER_JSON_OR_PACK TEXT [--json]",
		Short: "Print the token ids of a text (bos included), as the tokenizers library would",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, toks, err := session.Tokenize(args[0], args[1])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, map[string]any{"ids": ids, "tokens": toks})
			}
			for i, id := range ids {
				fmt.Fprintf(e.stdout, "%d\t%q\n", id, toks[i])
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print {"ids": [...], "tokens": [...]}`)
	return c
}
