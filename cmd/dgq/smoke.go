package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/check"
)

func newSmokeCmd(e *env) *cobra.Command {
	var (
		o      check.SmokeOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "smoke PACK [--json] [--reference FILE]",
		Short: "Run a fixed battery on a pack: finite logits, determinism, decodable replies, parity, timings",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := check.Smoke(e.ctx, args[0], o)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, r); err != nil {
					return err
				}
			} else {
				renderSmoke(e.stdout, args[0], r)
			}
			if !r.Pass {
				return &codedError{err: fmt.Errorf("smoke of %s failed", args[0]), code: exitFailure, silent: asJSON}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.Flags().StringVar(&o.Reference, "reference", "", "reference.safetensors for the parity check (default: found from the pack's source)")
	c.Flags().Uint64Var(&o.Seed, "seed", 7, "seed of the determinism check")
	c.Flags().IntVar(&o.Workers, "workers", 0, "forward-pass goroutines (0 = all cores)")
	return c
}

func renderSmoke(w io.Writer, dir string, r *check.SmokeReport) {
	fmt.Fprintf(w, "smoke %s\n", dir)
	for _, c := range r.Checks {
		status := map[bool]string{true: "ok  ", false: "FAIL"}[c.Pass]
		if c.Skipped {
			status = "skip"
		}
		fmt.Fprintf(w, "  %s %-24s %s\n", status, c.Name, c.Detail)
	}
	fmt.Fprintf(w, "  load %.2fs, prefill %.0f tokens/s, denoise step %.1f ms\n", r.LoadSeconds, r.PrefillTokensPerSec, r.DenoiseStepMillis)
	fmt.Fprintf(w, "smoke: %s\n", map[bool]string{true: "pass", false: "FAIL"}[r.Pass])
}
