package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/overlay"
)

func newAuditCmd(e *env) *cobra.Command {
	var asJSON, deep bool
	c := &cobra.Command{
		Use:   "audit PACK [--json] [--deep]",
		Short: "Check every rule of the format and every digest; exit 0 only when the pack is clean",
		Long: `audit checks every rule of the .dgq format (the engine's and dgq's) and every tensor's digest. A pack
without digests (as the engine writes them) gets a note, not a problem: its content cannot be verified;
--deep also decodes every tensor and reports any that holds a NaN or an infinity. Every finding is listed, not
only the first; the last line says what was checked.

It reads the pack (a folder or ORG/NAME[@REV] in the hub cache) and, for a layered pack, the base shards it
references in the Hugging Face cache.

Exit codes: 0 nothing but notes; 2 usage; 3 any finding; 4 only stale findings (the pack is fine: the cache
needs the dgq download the messages name); 130 interrupted (143 by SIGTERM).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := overlay.Audit(e.ctx, args[0], dgq.AuditOptions{Progress: newProgress(e), Deep: deep})
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(e.stdout, rep); err != nil {
					return err
				}
			} else {
				renderAudit(e.stdout, args[0], rep, deep)
			}
			if !rep.OK {
				err := fmt.Errorf("audit of %s found %s", args[0], plural(len(rep.Findings), "problem", "problems"))
				return &codedError{err: err, code: auditExitCode(rep), silent: asJSON}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print {ok, findings} as JSON")
	c.Flags().BoolVar(&deep, "deep", false, "also decode every tensor and check it is finite")
	return c
}

// auditExitCode is exitStale when every finding is a stale external file
// (the pack is fine; the cache needs the dgq download the messages name),
// exitInvalid otherwise.
func auditExitCode(rep *dgq.AuditReport) int {
	for _, f := range rep.Findings {
		if f.Kind != dgq.KindStale && !f.Note() {
			return exitInvalid
		}
	}
	return exitStale
}
