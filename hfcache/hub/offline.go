package hub

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// offline answers from the disk alone (HF_HUB_OFFLINE), as
// huggingface_hub's snapshot_download does when it cannot reach the Hub:
//
//   - the commit is the revision when it is a 40-hex commit, else what
//     refs/<revision> of the cache holds (for --local-dir too; there, when
//     the cache has no ref, the one tree cache file of DIR names it);
//   - with the listing of that commit in the tree cache, every selected
//     file must be in place with its size (Complete is true), else the
//     error names the missing ones;
//   - without a listing, completeness cannot be told: the snapshot folder
//     (or DIR) is reported with the selected files it holds (Complete is
//     false), provided it holds at least one.
//
// Nothing is written. Errors wrap ErrOffline (ErrEntryNotFound when the
// listing has no file the patterns select).
func (d *downloader) offline() (*Result, error) {
	res := &Result{Repo: d.repo, Revision: d.revision, Offline: true, LocalDir: d.local != nil}
	commit := ""
	switch {
	case isCommit(d.revision):
		commit = d.revision
	case d.hasCache:
		if data, err := readSmall(d.cache.ref(d.revision), 256); err == nil && isCommit(strings.TrimSpace(string(data))) {
			commit = strings.TrimSpace(string(data))
		}
	}
	hint := "unset " + EnvOffline + " to download it"
	var base string
	if d.local != nil {
		base = d.local.dir
		if commit == "" {
			commit = soleTreeCache(d.local.meta)
		}
	} else {
		if commit == "" {
			return nil, failf(ErrOffline, "%s is not in the hub cache %s (no refs/%s) and %s is set: %s", describe(d.repo, d.revision), d.cache.root, d.revision, EnvOffline, hint)
		}
		base = d.cache.snapshot(commit)
	}
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		return nil, failf(ErrOffline, "%s: no folder %s and %s is set: %s", describe(d.repo, d.revision), base, EnvOffline, hint)
	}
	res.Commit, res.Snapshot = commit, absPath(base)
	var listing []Entry
	if commit != "" {
		listing = readTreeCache(d.treeFolder(), commit)
	}
	if listing != nil {
		selected := d.selectEntries(listing)
		if len(selected) == 0 {
			return nil, d.noneSelected(len(listing))
		}
		var missing []string
		for _, e := range selected {
			if sz, ok := fileSize(filepath.Join(base, filepath.FromSlash(e.Path))); !ok || sz != e.Size {
				missing = append(missing, e.Path)
			}
		}
		if len(missing) > 0 {
			more := ""
			if len(missing) > 3 {
				more = ", …"
			}
			return nil, failf(ErrOffline, "%s (commit %s) is incomplete on disk: %d of %d files missing (%s%s) and %s is set: %s",
				describe(d.repo, d.revision), commit, len(missing), len(selected), strings.Join(missing[:min(3, len(missing))], ", "), more, EnvOffline, hint)
		}
		for _, e := range selected {
			res.Files = append(res.Files, FileResult{Path: e.Path, Size: e.Size, LFS: e.LFS, ETag: e.ETag(), SHA256: e.SHA256,
				Action: ActionPresent, Local: filepath.Join(res.Snapshot, filepath.FromSlash(e.Path))})
			res.BytesTotal += e.Size
		}
		res.Complete = true
		return res, nil
	}
	files := d.walkPresent(base)
	if len(files) == 0 {
		return nil, failf(ErrOffline, "%s: %s holds no file the patterns select, there is no cached listing, and %s is set: %s", describe(d.repo, d.revision), base, EnvOffline, hint)
	}
	res.Files = files
	for _, f := range files {
		res.BytesTotal += f.Size
	}
	return res, nil
}

// soleTreeCache returns the commit of the only tree cache file under
// folder, or "".
func soleTreeCache(folder string) string {
	des, err := os.ReadDir(filepath.Join(folder, "trees"))
	if err != nil {
		return ""
	}
	commit := ""
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !isCommit(name) {
			continue
		}
		if commit != "" {
			return ""
		}
		commit = name
	}
	return commit
}

// walkPresent lists the selected files under base (following the snapshot
// symlinks; DIR/.cache/huggingface skipped), with what the blob names
// tell of them.
func (d *downloader) walkPresent(base string) []FileResult {
	var out []FileResult
	_ = filepath.WalkDir(base, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, rerr := filepath.Rel(base, p)
		if rerr != nil || rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if de.IsDir() {
			if d.local != nil && rel == ".cache" {
				return filepath.SkipDir
			}
			return nil
		}
		sz, ok := fileSize(p)
		if !ok || !d.filter.Keep(rel) {
			return nil
		}
		fr := FileResult{Path: rel, Size: sz, Action: ActionPresent, Local: filepath.Join(absPath(base), filepath.FromSlash(rel))}
		if target, err := os.Readlink(p); err == nil {
			fr.ETag = filepath.Base(target)
			if isHex(fr.ETag, 64) {
				fr.LFS, fr.SHA256 = true, fr.ETag
			}
		}
		out = append(out, fr)
		return nil
	})
	slices.SortFunc(out, func(a, b FileResult) int { return strings.Compare(a.Path, b.Path) })
	return out
}
