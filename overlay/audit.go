package overlay

import (
	"context"
	"errors"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
)

// Audit checks every rule and every digest of any pack. For a layered pack it
// also checks every pin (a stale or missing external file is a finding whose
// message carries the `dgq download` command that fixes it) and verifies the
// digests through the assembled canonical view, the same view Open gives
// every consumer.
func Audit(ctx context.Context, dir string, opts dgq.AuditOptions) (*dgq.AuditReport, error) {
	opts.Layered = auditView
	return dgq.Audit(ctx, dir, opts)
}

func auditView(_ context.Context, dir string, m *dgq.Manifest) ([]byte, func(), []dgq.Finding) {
	view, release, err := assemble(dir, m)
	if err == nil {
		return view, func() { release(view) }, nil
	}
	var findings []dgq.Finding
	for _, e := range unjoin(err) {
		f := dgq.Finding{Kind: dgq.KindSource, Message: e.Error()}
		var se *hfcache.StaleError
		if errors.As(e, &se) {
			f.Kind = dgq.KindStale
		}
		findings = append(findings, f)
	}
	return nil, nil, findings
}

// unjoin splits an errors.Join result into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
