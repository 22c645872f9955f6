package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/session"
)

// verifySource is where the source lies and what it is.
type verifySource struct {
	dir  string
	kind string // "pack", "snapshot" (in the configured hub cache) or "snapshot_copy"
}

// resolveVerifySource finds the source: the one given, else the one the
// manifest records.
func resolveVerifySource(m *dgq.Manifest, source string) (verifySource, error) {
	given := source != ""
	if !given {
		var err error
		if source, err = recordedSource(m); err != nil {
			return verifySource{}, err
		}
	}
	if st, err := os.Stat(filepath.Join(source, dgq.ManifestName)); err == nil && !st.IsDir() {
		return verifySource{dir: source, kind: "pack"}, nil
	}
	res, err := hfcache.ResolveSource(source)
	if err != nil {
		if given {
			return verifySource{}, fmt.Errorf("%w: --source %s: %w; pass a bf16 pack, a snapshot folder or ORG/NAME[@REV]", ErrNoSource, source, err)
		}
		return verifySource{}, fmt.Errorf("%w: the pack's recorded source %s: %w; or pass --source SNAPSHOT_DIR|BF16_PACK", ErrNoSource, source, err)
	}
	if st, err := os.Stat(filepath.Join(res.Dir, dgq.ManifestName)); err == nil && !st.IsDir() {
		return verifySource{dir: res.Dir, kind: "pack"}, nil // a bf16 pack repository in the hub cache
	}
	kind := "snapshot_copy"
	if res.Repo != "" {
		// A layered pack resolves its pins in the configured cache: only a
		// snapshot found there can be overlaid.
		root, _ := hfcache.CacheRoot()
		if c, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: res.Repo, Revision: res.Revision}); err == nil && sameDir(c.Dir, res.Dir) {
			kind = "snapshot"
		}
	}
	return verifySource{dir: res.Dir, kind: kind}, nil
}

// recordedSource is the source a manifest records: a layered pack's
// base_model, else dgq.source (the cached snapshot; its folder
// source_model when the cache no longer resolves it), else source_model.
func recordedSource(m *dgq.Manifest) (string, error) {
	ref := m.BaseModel
	if ref == nil && m.DGQ != nil {
		ref = m.DGQ.Source
	}
	if ref != nil {
		root, _ := hfcache.CacheRoot()
		res, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: ref.Repo, Revision: ref.Revision})
		if err == nil {
			return res.Dir, nil
		}
		if m.BaseModel == nil && dgq.IsPrivatePath(m.SourceModel) && isDir(m.SourceModel) {
			return m.SourceModel, nil // a pack from before source_model stopped recording paths
		}
		return "", fmt.Errorf("%w: the pack's source %s@%s: %w; or pass --source SNAPSHOT_DIR|BF16_PACK", ErrNoSource, ref.Repo, ref.Revision, err)
	}
	if m.SourceModel == "" {
		return "", fmt.Errorf("%w: the pack records no source; pass --source SNAPSHOT_DIR|ORG/NAME[@REV]|BF16_PACK", ErrNoSource)
	}
	if dgq.IsPrivatePath(m.SourceModel) {
		return m.SourceModel, nil // a pack from before source_model stopped recording paths
	}
	return "", fmt.Errorf("%w: the pack was made from a local folder named %q, which it does not locate; pass --source SNAPSHOT_DIR|ORG/NAME[@REV]|BF16_PACK", ErrNoSource, m.SourceModel)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return p != "" && err == nil && st.IsDir()
}

func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// precheck refuses, before anything is loaded, a source pack that is not
// bf16 and a source whose config.json differs from the pack's.
func (s verifySource) precheck(packDir string) error {
	if s.kind == "pack" {
		m, err := dgq.ReadManifest(s.dir)
		if err != nil {
			return err
		}
		for _, t := range m.Tensors {
			if t.Format != codecs.Raw {
				return fmt.Errorf("%w: %s holds %s tensors (%s): verify compares with bf16; pass a bf16 pack or the snapshot",
					ErrSourceMismatch, s.dir, t.Format, t.Name)
			}
		}
	}
	pc, err1 := readConfig(packDir)
	sc, err2 := readConfig(s.dir)
	if err1 != nil || err2 != nil {
		return nil // the loaded models are compared after loading
	}
	if d := configDiff(pc, sc); d != "" {
		return fmt.Errorf("%w: %s has another config than the pack (%s); pass the pack's own source", ErrSourceMismatch, s.dir, d)
	}
	return nil
}

func readConfig(dir string) (*layout.Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	return layout.ParseConfig(b)
}

// load opens the source as a session; a snapshot is first quantized into a
// temporary bf16 pack (layered over the cache when it lies there), which
// cleanup removes.
func (s verifySource) load(ctx context.Context, lo session.Options) (*session.Session, func(), error) {
	nop := func() {}
	if s.kind == "pack" {
		ss, err := session.Load(s.dir, lo)
		return ss, nop, err
	}
	tmp, err := os.MkdirTemp("", "dgq-verify-source-")
	if err != nil {
		return nil, nop, fmt.Errorf("verify: %w", err)
	}
	cleanup := func() { os.RemoveAll(tmp) }
	out := filepath.Join(tmp, "source.dgq")
	_, err = dgq.Quantize(ctx, dgq.QuantizeOptions{Source: s.dir, Out: out, Profile: "bf16", Overlay: s.kind == "snapshot", Workers: lo.Workers})
	if err != nil {
		cleanup()
		return nil, nop, fmt.Errorf("verify: making a bf16 pack of %s: %w", s.dir, err)
	}
	lo.SkipDigests = true // Quantize has just read and hashed every byte
	ss, err := session.Load(out, lo)
	if err != nil {
		cleanup()
		return nil, nop, err
	}
	return ss, cleanup, nil
}
