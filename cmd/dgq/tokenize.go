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
		Long: `tokenize encodes TEXT with a tokenizer.json — given as the file, or as the pack or checkpoint folder
(or ORG/NAME[@REV] in the Hugging Face hub cache) that holds it — as the tokenizers library does, with the
special tokens it adds (bos first), and prints one line per token: the id and the token string. --json prints
{"ids": [...], "tokens": [...]}, tokens such as <bos> as they are.

It reads the tokenizer.json only. TEXT must be valid UTF-8.

Exit codes: 0; 2 usage (TEXT not valid UTF-8, a wrong number of arguments); 3 no tokenizer.json where it
was looked for, or a malformed one; 4 a repo not in the hub cache; 5 a tokenizer.json that cannot be read.`,
		Args: cobra.ExactArgs(2),
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
