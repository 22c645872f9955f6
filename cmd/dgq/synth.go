package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

func newSynthCmd(e *env) *cobra.Command {
	var (
		o      dgq.SynthOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "synth -o DIR --layers N [--seed S] [--shard-size BYTES]",
		Short: "Development tool: write a real-shape synthetic DiffusionGemma snapshot for benchmarks",
		Long: `synth writes a Hugging Face snapshot with the real tensor names and dimensions of
google/diffusiongemma-26B-A4B-it (hidden 2816, 128 experts x 704, dense 2112, 16 heads, sliding 8x256,
full 2x512 K=V, vocab 262144) and N decoder layers, filled with seeded heavy-tailed bf16 values, in
shards of up to --shard-size bytes. One layer is about 1.6 GB on top of the 1.5 GB embedding.

It reads nothing; it writes DIR (through a staging folder renamed into place at the end).

Exit codes: 0; 2 usage (no -o, --layers outside 1..30, a DIR that exists); 5 I/O (a full disk); 130
interrupted (143 by SIGTERM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Out == "" {
				return usageErr(fmt.Errorf("synth: -o DIR is required"))
			}
			o.Progress = newProgress(e)
			res, err := dgq.Synthesize(e.ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, synthResult{Dir: res.Dir, Layers: o.Layers, Tensors: res.Tensors, Shards: res.Shards, Bytes: res.Bytes})
			}
			fmt.Fprintf(e.stdout, "wrote %s: %s, %s, %s of bf16\n", res.Dir, plural(res.Tensors, "tensor", "tensors"), plural(res.Shards, "shard", "shards"), humanBytes(res.Bytes))
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Out, "out", "o", "", "snapshot directory to create (required)")
	f.IntVar(&o.Layers, "layers", 2, "decoder layers (1..30)")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	f.Int64Var(&o.ShardBytes, "shard-size", dgq.SynthShardBytes, "maximum shard size in bytes (32768 to 2^40; 0 = 5000000000)")
	f.BoolVar(&asJSON, "json", false, "print the result (or the error) as one JSON object")
	return c
}

// synthResult is synth --json's output.
type synthResult struct {
	Dir     string `json:"dir"`
	Layers  int    `json:"layers"`
	Tensors int    `json:"tensors"`
	Shards  int    `json:"shards"`
	Bytes   int64  `json:"bytes"`
}
