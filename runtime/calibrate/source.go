package calibrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/check"
)

// source is the bf16 pack calibrated.
type source struct {
	dir            string // the bf16 pack run
	origin         string // the folder the source resolved to (the pack, or the snapshot)
	kind           string // "pack", "snapshot" (a temporary pack layered over it) or "snapshot_copy" (copied)
	repo, revision string // the snapshot's, when known
}

// tempPrefix names a snapshot's temporary pack folders (dgq.MakeTempDir
// removes those whose process is gone).
const tempPrefix = "dgq-calibrate-source-"

// resolveSource finds the source: a pack folder, ORG/NAME[@REV] of a
// cached pack or snapshot, or a snapshot folder. A snapshot is turned into
// a temporary bf16 pack by check.SnapshotPack, as dgq verify does (layered
// over the cached shards when it lies in the hub cache; otherwise copied,
// its free space checked and the copy announced), which cleanup removes.
func resolveSource(ctx context.Context, o Options) (_ source, cleanup func(), err error) {
	nop := func() {}
	if o.Source == "" {
		return source{}, nop, fmt.Errorf("%w: no source given", ErrOptions)
	}
	if isPack(o.Source) {
		return source{dir: o.Source, origin: o.Source, kind: "pack"}, nop, nil
	}
	res, err := hfcache.ResolveSource(o.Source)
	if err != nil {
		return source{}, nop, err
	}
	if isPack(res.Dir) {
		return source{dir: res.Dir, origin: res.Dir, kind: "pack", repo: res.Repo, revision: res.Revision}, nop, nil
	}
	overlay := check.Overlayable(res)
	dir, remove, err := check.SnapshotPack(ctx, res.Dir, check.SnapshotPackOptions{Copy: !overlay,
		Tmp: o.Tmp, Prefix: tempPrefix, Workers: o.Load.Workers, Progress: o.Progress, Notify: o.Notify})
	if err != nil {
		return source{}, nop, fmt.Errorf("calibrate: %w", err)
	}
	kind := "snapshot"
	if !overlay {
		kind = "snapshot_copy"
	}
	return source{dir: dir, origin: res.Dir, kind: kind, repo: res.Repo, revision: res.Revision}, remove, nil
}

func isPack(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, dgq.ManifestName))
	return err == nil && !st.IsDir()
}
