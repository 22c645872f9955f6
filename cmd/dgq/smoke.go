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
		Use:   "smoke PACK [--json] [--reference FILE] [--backend cpu|cuda|metal] [--precision f32|bf16] [--skip-digests]",
		Short: "Run a fixed battery on a pack: finite logits, determinism, decodable replies, parity, timings",
		Long: `smoke loads the pack (every digest verified, unless --skip-digests) on the backend and runs a fixed
battery, each check ok, FAIL or skip with one line of detail: finite_logits (a prefill and two denoise steps,
every logit finite), deterministic_generation (one block twice at --seed: the same tokens, a reply that decodes
as UTF-8), parity (dgq parity's scenarios against --reference, or the reference known for the pack's source;
skipped when none is known or it gives no verdict), verify (a short dgq verify against the pack's bf16 source
when that is at hand). It also times the load, a prefill and a denoise step.

It reads the pack (a folder or ORG/NAME[@REV] in the hub cache), the reference and the source when found.

Exit codes: 0 every check passed or was skipped; 1 a check failed; 2 usage; 3 not a pack, a pack that does
not load, or a --reference that does not exist; 4 a pack in the hub cache that is not there, or a layered
pack's base shard missing or changed; 6 the backend cannot run here; 130 interrupted (143 by SIGTERM).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(o.Load.Backend, o.Load.Precision); err != nil {
				return err
			}
			o.Progress, o.Steps, o.Notify = newProgress(e), newCountProgress(e), notifier(e)
			o.Load.Note = onceNotifier(e)
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
	c.Flags().StringVar(&o.Reference, "reference", "", "the parity check's reference, as parity's --reference (default: found from the pack's source)")
	c.Flags().Uint64Var(&o.Seed, "seed", 7, "seed of the determinism check")
	c.Flags().StringVar(&o.Tmp, "tmp", "", "folder for the verify check's temporary bf16 pack of a snapshot source (default $TMPDIR)")
	backendFlags(c, &o.Load)
	c.Flags().IntVar(&o.Load.Workers, "workers", 0, "forward-pass goroutines of the cpu backend (0 = all cores)")
	c.Flags().BoolVar(&o.Load.SkipDigests, "skip-digests", false, "trust the pack's digests instead of verifying them at load")
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
