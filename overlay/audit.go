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
//
// A digest that does not match bytes read from a pinned Hugging Face shard
// is a stale finding too: the shard changed after it was pinned, and the
// message names the shard and ends with the `dgq download … --include FILE`
// that fetches it again.
func Audit(ctx context.Context, dir string, opts dgq.AuditOptions) (*dgq.AuditReport, error) {
	opts.Layered = auditView
	rep, err := dgq.Audit(ctx, dir, opts)
	if err != nil || rep.OK {
		return rep, err
	}
	if resolved, err := dgq.ResolvePack(dir); err == nil {
		if m, err := dgq.ReadManifest(resolved); err == nil && m.Layered() {
			rep = dgq.ReportOf(staleFindings(m, rep.Findings))
		}
	}
	return rep, nil
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
