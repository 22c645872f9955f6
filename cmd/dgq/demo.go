package main

import (
	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
)

func newDemoCmd(e *env) *cobra.Command {
	var o dgq.DemoOptions
	c := &cobra.Command{
		Use:   "demo [--profile P] [-o OUT]",
		Short: "Quantize the embedded tiny DiffusionGemma checkpoint, then inspect and audit the pack",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = newProgress(e)
			res, err := dgq.Demo(e.ctx, o)
			if err != nil {
				return err
			}
			renderDemo(e.stdout, res)
			if !res.Audit.OK {
				return &codedError{err: errAuditFailed, code: exitInvalid}
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.Profile, "profile", "q4", "quantization profile")
	c.Flags().StringArrayVar(&o.Sets, "set", nil, "override a class: class=format (repeatable)")
	c.Flags().StringVarP(&o.Out, "out", "o", "", "pack directory (default: a new temporary directory)")
	c.Flags().BoolVar(&o.Force, "force", false, "replace an existing pack at the output path")
	return c
}
