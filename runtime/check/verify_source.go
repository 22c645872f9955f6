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
	if Overlayable(res) {
		kind = "snapshot"
	}
	return verifySource{dir: res.Dir, kind: kind}, nil
}

// Overlayable reports whether a resolved snapshot can be the base of a
// layered pack: a layered pack resolves its pins in the configured hub
// cache, so only a snapshot found there qualifies (a folder laid out like a
// cache entry elsewhere must be copied).
func Overlayable(res *hfcache.Resolved) bool {
	if res.Repo == "" {
		return false
	}
	root, _ := hfcache.CacheRoot()
	c, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: res.Repo, Revision: res.Revision})
	return err == nil && sameDir(c.Dir, res.Dir)
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

// verifyTempPrefix names the temporary folders of snapshot sources:
// dgq-verify-source-<pid>-…; a run removes those whose process is gone
// (dgq.MakeTempDir).
const verifyTempPrefix = "dgq-verify-source-"

// load opens the source as a session; a snapshot is first quantized into a
// temporary bf16 pack in o.Tmp (layered over the cache when it lies there;
// copied whole, announced through o.Notify with its size, its free space
// checked first, otherwise), which cleanup removes. Every error path removes
// it too.
func (s verifySource) load(ctx context.Context, o VerifyOptions) (_ *session.Session, _ func(), err error) {
	nop := func() {}
	lo := o.Load
	if s.kind == "pack" {
		ss, err := session.Load(ctx, s.dir, lo)
		return ss, nop, err
	}
	dir, remove, err := SnapshotPack(ctx, s.dir, SnapshotPackOptions{Copy: s.kind == "snapshot_copy", Tmp: o.Tmp,
		Prefix: verifyTempPrefix, Workers: lo.Workers, Progress: o.Progress, Notify: o.Notify})
	if err != nil {
		return nil, nop, err
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	lo.SkipDigests = true // Quantize has just read and hashed every byte
	ss, err := session.Load(ctx, dir, lo)
	if err != nil {
		return nil, nop, err
	}
	return ss, remove, nil
}

// SnapshotPackOptions configure SnapshotPack.
type SnapshotPackOptions struct {
	// Copy: the snapshot lies outside the hub cache, so its bytes are
	// copied (free space checked first, the copy announced through Notify);
	// otherwise the pack is layered over the cached shards.
	Copy bool
	// Tmp is the folder the temporary pack is made in ("": $TMPDIR), Prefix
	// its folder's name prefix (dgq.MakeTempDir removes those of dead
	// processes).
	Tmp, Prefix string
	Workers     int
	// Progress is told the bytes read; Notify the one line announcing a copy.
	Progress dgq.Progress
	Notify   func(string)
}

// SnapshotPack makes a temporary bf16 pack of a snapshot folder — the form
// in which verify and calibrate run a Hugging Face checkpoint — and returns
// its folder and the function that removes it (already done on error).
func SnapshotPack(ctx context.Context, snapshot string, o SnapshotPackOptions) (_ string, remove func(), err error) {
	nop := func() {}
	s := verifySource{dir: snapshot}
	var need int64
	if o.Copy {
		if need, err = s.copySize(ctx); err != nil {
			return "", nop, err
		}
		if err := checkSpace(o.Tmp, need); err != nil {
			return "", nop, err
		}
	}
	tmp, err := dgq.MakeTempDir(o.Tmp, o.Prefix)
	if err != nil {
		return "", nop, err
	}
	remove = func() { os.RemoveAll(tmp) }
	qo := dgq.QuantizeOptions{Source: snapshot, Out: filepath.Join(tmp, "source.dgq"), Profile: "bf16", Overlay: !o.Copy, Workers: o.Workers}
	qo.Progress = o.Progress // a layered pack reads (hashes) every shard too
	if o.Copy && o.Notify != nil {
		o.Notify(fmt.Sprintf("copying the source snapshot %s (outside the hub cache) into a temporary bf16 pack in %s: %s; removed at the end (--tmp DIR puts it elsewhere)",
			snapshot, tmp, formatBytes(need)))
	}
	if _, err = dgq.Quantize(ctx, qo); err != nil {
		remove()
		return "", nop, fmt.Errorf("making a bf16 pack of %s: %w", snapshot, err)
	}
	return qo.Out, remove, nil
}

// copySize is what the copy of the snapshot takes on disk: the bf16 pack's
// blob (a plan of the snapshot: headers only) and its side files.
func (s verifySource) copySize(ctx context.Context) (int64, error) {
	plan, err := dgq.Quantize(ctx, dgq.QuantizeOptions{Source: s.dir, Profile: "bf16", DryRun: true})
	if err != nil {
		return 0, fmt.Errorf("verify: making a bf16 pack of %s: %w", s.dir, err)
	}
	need := plan.Plan.BlobSize
	for _, name := range dgq.EngineSideFiles {
		if st, err := os.Stat(filepath.Join(s.dir, name)); err == nil {
			need += st.Size()
		}
	}
	return need, nil
}

// checkSpace refuses a copy of need bytes into dir ("": os.TempDir()) when
// its file system has less free space (ErrNoSpace, with the numbers); where
// free space cannot be told it lets the copy try.
func checkSpace(dir string, need int64) error {
	if dir == "" {
		dir = os.TempDir()
	}
	free, ok := dgq.FreeSpace(dir)
	if !ok || free >= need {
		return nil
	}
	return fmt.Errorf("%w: the source snapshot lies outside the hub cache, so it is copied into a temporary bf16 pack: that needs %s, and %s has %s free; pass --tmp DIR on a larger file system, or put the snapshot in the hub cache (dgq download) or pass a bf16 pack as --source, which are not copied",
		ErrNoSpace, formatBytes(need), dir, formatBytes(free))
}

// formatBytes is a size for a message: "50.3 GB (50312345678 bytes)".
func formatBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB (%d bytes)", float64(n)/1e9, n)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB (%d bytes)", float64(n)/1e6, n)
	}
	return fmt.Sprintf("%d bytes", n)
}
