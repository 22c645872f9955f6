package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

func newSynthCmd(e *env) *cobra.Command {
	var o dgq.SynthOptions
	c := &cobra.Command{
		Use:   "synth -o DIR --layers N [--seed S] [--shard-size BYTES]",
		Short: "Development tool: write a real-shape synthetic DiffusionGemma snapshot for benchmarks",
		Long: `synth writes a Hugging Face snapshot with the real tensor names and dimensions of
google/diffusiongemma-26B-A4B-it (hidden 2816, 128 experts x 704, dense 2112, 16 heads, sliding 8x256,
full 2x512 K=V, vocab 262144) and N decoder layers, filled with seeded heavy-tailed bf16 values, in
shards of up to --shard-size bytes. One layer is about 1.6 GB on top of the 1.5 GB embedding.`,
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
			fmt.Fprintf(e.stdout, "wrote %s: %d tensors, %d shards, %d bytes of bf16\n", res.Dir, res.Tensors, res.Shards, res.Bytes)
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Out, "out", "o", "", "snapshot directory to create (required)")
	f.IntVar(&o.Layers, "layers", 2, "decoder layers (1..30)")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed")
	f.Int64Var(&o.ShardBytes, "shard-size", 5_000_000_000, "maximum shard size in bytes")
	return c
}
