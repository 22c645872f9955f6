package overlay

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
)

// A pin checks a shard's size and header digest, not its tensor bytes: a
// byte changed in a cached shard after the pack pinned it shows up as a
// tensor whose digest does not match. Its fix is in the cache (fetch the
// shard again), not in the pack, so the loader and audit report it as a
// stale external file (*hfcache.StaleError, exit 4) naming the shard and
// ending with the `dgq download … --include FILE` that restores it.

// staleShard is the stale-file error of a digest finding whose tensor's
// bytes come from a pinned Hugging Face shard, with the tensor named; nil
// for any other finding.
func staleShard(m *dgq.Manifest, f dgq.Finding) *hfcache.StaleError {
	ef, ok := shardOf(m, f)
	if !ok {
		return nil
	}
	return shardError(m, ef, fmt.Sprintf("tensor %s", f.Tensor))
}

// shardOf is the pinned Hugging Face file a digest finding's tensor is read
// from.
func shardOf(m *dgq.Manifest, f dgq.Finding) (dgq.ExternalFile, bool) {
	if f.Kind != dgq.KindDigest || f.Tensor == "" || m.BaseModel == nil {
		return dgq.ExternalFile{}, false
	}
	for _, t := range m.Tensors {
		if t.Name != f.Tensor {
			continue
		}
		if t.Source == nil || t.Source.Kind != dgq.SourceExternal {
			return dgq.ExternalFile{}, false
		}
		for _, ef := range m.ExternalFiles {
			if ef.ID == t.Source.File && ef.Role == dgq.RoleHF {
				return ef, true
			}
		}
		return dgq.ExternalFile{}, false
	}
	return dgq.ExternalFile{}, false
}

// shardError says that the bytes of what (one or more tensors) read from
// the pinned shard ef no longer match the pack's digests, and how to fetch
// the shard again: the cached file must be removed first (a download keeps
// a file of the right size).
func shardError(m *dgq.Manifest, ef dgq.ExternalFile, what string) *hfcache.StaleError {
	base := *m.BaseModel
	path := base.Repo + "@" + base.Revision + "/" + ef.Path
	remove := "remove the cached file"
	if root, _ := hfcache.CacheRoot(); root != "" {
		if res, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: base.Repo, Revision: base.Revision}); err == nil {
			path = filepath.Join(res.Dir, filepath.FromSlash(ef.Path))
			if real, err := filepath.EvalSymlinks(path); err == nil {
				remove = "remove " + real
			}
		}
	}
	return &hfcache.StaleError{
		Path: path,
		What: fmt.Sprintf("the bytes of %s no longer match the pack's digest: the cached shard changed after the pack pinned it; %s and fetch it again", what, remove),
		Hint: hfcache.DownloadHint(base.Repo, base.Revision, ef.Path),
	}
}

// staleFindings turns every digest finding of a tensor read from a pinned
// Hugging Face shard into a stale finding (audit: exit 4 when they are the
// only ones).
func staleFindings(m *dgq.Manifest, findings []dgq.Finding) []dgq.Finding {
	for i, f := range findings {
		if se := staleShard(m, f); se != nil {
			findings[i] = dgq.Finding{Tensor: f.Tensor, Kind: dgq.KindStale, Message: se.Error()}
		}
	}
	return findings
}

// loadError is the loader's refusal of a layered pack with findings: when
// every finding is a digest mismatch of bytes read from pinned shards, one
// stale-file error per shard (errors.Join; exit 4); otherwise the
// *dgq.InvalidError of every finding, those as stale findings.
func loadError(dir string, m *dgq.Manifest, findings []dgq.Finding) error {
	byShard := map[string][]string{}
	var shards []dgq.ExternalFile
	other := false
	for _, f := range findings {
		ef, ok := shardOf(m, f)
		if !ok {
			other = true
			continue
		}
		if byShard[ef.ID] == nil {
			shards = append(shards, ef)
		}
		byShard[ef.ID] = append(byShard[ef.ID], f.Tensor)
	}
	if other || len(shards) == 0 {
		return &dgq.InvalidError{Dir: dir, Findings: staleFindings(m, findings)}
	}
	sort.Slice(shards, func(a, b int) bool { return shards[a].ID < shards[b].ID })
	errs := make([]error, len(shards))
	for i, ef := range shards {
		names := byShard[ef.ID]
		sort.Strings(names)
		what := "tensor " + names[0]
		if len(names) > 1 {
			what = fmt.Sprintf("tensors %s and %d more", names[0], len(names)-1)
		}
		errs[i] = shardError(m, ef, what)
	}
	return errors.Join(errs...)
}
