package hfcache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultRevision is the branch used when a RepoRef names none.
const DefaultRevision = "main"

// maxRepoID is the longest repo id the Hub accepts ("org/name").
const maxRepoID = 96

// maxRevision bounds a branch or tag name.
const maxRevision = 256

// maxRefFile bounds what is read from refs/<name> (a 40-hex commit and
// perhaps a newline).
const maxRefFile = 256

// RepoRef is a parsed "org/name[@revision]"; Revision empty means "main".
type RepoRef struct {
	Repo, Revision string
}

// String returns "org/name" or "org/name@revision".
func (r RepoRef) String() string {
	if r.Revision == "" {
		return r.Repo
	}
	return r.Repo + "@" + r.Revision
}

// rev returns the revision to look up.
func (r RepoRef) rev() string {
	if r.Revision == "" {
		return DefaultRevision
	}
	return r.Revision
}

// ParseRepoRef parses "org/name" or "org/name@revision". It returns false
// when s does not look like that (a path such as "./x", "/abs" or "a/b/c",
// an empty part, characters a Hub repo id or a git ref cannot hold), so that
// the caller can treat s as a local path instead.
//
// org and name each hold ASCII letters, digits, '_', '-' and '.', start and
// end with a letter, digit or '_', contain neither "--" nor "..", and the
// repo id is at most 96 bytes (the Hub's rules). The revision is a branch or
// tag name (letters, digits and "._-+/", '/'-separated elements that are
// neither empty nor start with '.', not ending in ".lock", not starting with
// '-'; for example "main", "v1.0", "refs/pr/1") or a 40-hex commit.
func ParseRepoRef(s string) (RepoRef, bool) {
	repo, rev, hasRev := strings.Cut(s, "@")
	if !validRepoID(repo) {
		return RepoRef{}, false
	}
	if hasRev && !validRevision(rev) {
		return RepoRef{}, false
	}
	return RepoRef{Repo: repo, Revision: rev}, true
}

// validRepoID checks "org/name".
func validRepoID(repo string) bool {
	org, name, ok := strings.Cut(repo, "/")
	return ok && len(repo) <= maxRepoID && validRepoPart(org) && validRepoPart(name)
}

// validRepoPart checks one side of a repo id.
func validRepoPart(s string) bool {
	if s == "" || strings.Contains(s, "--") || strings.Contains(s, "..") {
		return false
	}
	word := func(c byte) bool {
		return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
	}
	if !word(s[0]) || !word(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !word(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// validRevision checks a branch, tag or commit name; the name is used as a
// path below refs/, so it must stay inside it.
func validRevision(rev string) bool {
	if rev == "" || len(rev) > maxRevision || rev[0] == '-' || strings.HasSuffix(rev, ".lock") {
		return false
	}
	for i := 0; i < len(rev); i++ {
		c := rev[i]
		ok := c == '_' || c == '-' || c == '.' || c == '+' || c == '/' ||
			(c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !ok {
			return false
		}
	}
	for _, el := range strings.Split(rev, "/") {
		if el == "" || el[0] == '.' {
			return false
		}
	}
	return true
}

// isCommit reports whether s is a full lower-case 40-hex commit hash, the
// name of a snapshots/ folder.
func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// repoFolder returns the cache folder name of "org/name": models--org--name.
func repoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// Resolved is a snapshot folder found in the cache.
type Resolved struct {
	// Root is the hub cache folder (the one holding models--ORG--NAME/), or
	// "" for a local folder outside any cache.
	Root string
	// Repo is "ORG/NAME", or "" for a local folder outside any cache.
	Repo string
	// Revision is always the 40-hex commit (or "" with Repo).
	Revision string
	// Ref is the branch or tag the commit was found through, or "" when a
	// commit (or a folder) was given.
	Ref string
	// Dir is the snapshot folder, Root/models--ORG--NAME/snapshots/<commit>,
	// or the folder as given to ResolveSource.
	Dir string
}

// Resolve finds ref in the hub cache folder root:
//
//   - the repo folder is root/models--ORG--NAME;
//   - a revision (default "main") naming a file refs/<revision> (a branch,
//     a tag, or "refs/pr/N", which the cache stores as refs/refs/pr/N) is
//     replaced by the commit written in it, as huggingface_hub does;
//     otherwise it must be a 40-hex lower-case commit;
//   - the snapshot folder snapshots/<commit> must exist. Its entries may be
//     relative symlinks into blobs/ or real files (HF_HUB_DISABLE_SYMLINKS);
//     Resolve does not open them (OpenSnapshot does).
//
// Errors wrap ErrRepoRef for a malformed ref and ErrNotInCache for a missing
// repo, revision or snapshot folder; they end with the fix, "dgq download
// ORG/NAME --revision REV".
func Resolve(root string, ref RepoRef) (*Resolved, error) {
	return resolveIn(root, "", ref, false)
}

// resolveIn is Resolve with the root's source for messages; notLocal says
// that the name was not found as a local folder either.
func resolveIn(root, source string, ref RepoRef, notLocal bool) (*Resolved, error) {
	if !validRepoID(ref.Repo) {
		return nil, fail(ErrRepoRef, "", "repo id %s is not org/name", quote(ref.Repo))
	}
	rev := ref.rev()
	if !validRevision(rev) {
		return nil, fail(ErrRepoRef, "", "%s: revision %s is not a branch, tag or commit name", ref.Repo, quote(rev))
	}
	hint := DownloadHint(ref.Repo, rev)
	if root == "" {
		return nil, fail(ErrNotInCache, "", "%s: cannot locate the hub cache (no home folder; set HF_HUB_CACHE or DGQ_HF_HOME); fix: %s", ref.Repo, hint)
	}
	where := describeRoot(root, source)
	repoDir := filepath.Join(root, repoFolder(ref.Repo))
	if fi, err := os.Stat(repoDir); err != nil || !fi.IsDir() {
		also := ""
		if notLocal {
			also = ", nor a local folder"
		}
		return nil, fail(ErrNotInCache, "", "repo %s is not in the hub cache %s%s; fix: %s", ref.Repo, where, also, hint)
	}

	commit, via := "", ""
	refPath := filepath.Join(repoDir, "refs", filepath.FromSlash(rev))
	switch data, err := readRef(refPath); {
	case err == nil:
		commit, via = strings.TrimSpace(string(data)), rev
		if !isCommit(commit) {
			return nil, fail(ErrNotInCache, "", "%s: %s holds %s, not a 40-hex commit; fix: %s", ref.Repo, display(refPath), quote(clip(commit)), hint)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("hfcache: %s: %w", display(refPath), err)
	case isCommit(rev):
		commit = rev
	default:
		return nil, fail(ErrNotInCache, "", "%s: revision %s is not in the hub cache %s: no refs/%s%s; fix: %s",
			ref.Repo, rev, where, rev, cachedRefs(filepath.Join(repoDir, "refs")), hint)
	}

	dir := filepath.Join(repoDir, "snapshots", commit)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		what := fmt.Sprintf("commit %s", commit)
		if via != "" {
			what = fmt.Sprintf("revision %s (commit %s, from refs/%s)", via, commit, via)
		}
		return nil, fail(ErrNotInCache, "", "%s: %s has no snapshot folder %s; fix: %s", ref.Repo, what, display(dir), hint)
	}
	return &Resolved{Root: root, Repo: ref.Repo, Revision: commit, Ref: via, Dir: dir}, nil
}

// readRef reads a refs/ file, at most maxRefFile bytes of it (more makes
// it malformed anyway); a folder there counts as missing.
func readRef(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	return io.ReadAll(io.LimitReader(f, maxRefFile))
}

// cachedRefs lists (a few of) the refs the repo folder has, as
// ", cached refs: main, v1" for an error message, or "" when there are
// none.
func cachedRefs(refsDir string) string {
	const show = 8
	var names []string
	filepath.WalkDir(refsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, err := filepath.Rel(refsDir, p); err == nil {
			names = append(names, filepath.ToSlash(rel))
		}
		if len(names) > 4*show {
			return filepath.SkipAll
		}
		return nil
	})
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	more := ""
	if len(names) > show {
		names, more = names[:show], ", …"
	}
	for i, n := range names {
		if !validRevision(n) {
			names[i] = quote(n)
		}
	}
	return ", cached refs: " + strings.Join(names, ", ") + more
}

// ResolveSource turns what a user passes to -m into a snapshot directory:
// an existing directory is used as is (and Detect fills Root, Repo and
// Revision when it lies in a cache layout, directly or through symlinks);
// otherwise it must parse as org/name[@rev] and resolve in CacheRoot().
// Errors wrap ErrNotInCache (ending with the fix command), ErrRepoRef, or
// ErrMissingFile for something that is neither a folder nor a repo id.
func ResolveSource(s string) (*Resolved, error) {
	if s == "" {
		return nil, fail(ErrMissingFile, "", "no model given: pass a snapshot folder or org/name[@revision]")
	}
	fi, statErr := os.Stat(s)
	if statErr == nil && fi.IsDir() {
		r := &Resolved{Dir: s}
		if root, repo, rev, ok := detectAny(s); ok {
			r.Root, r.Repo, r.Revision = root, repo, rev
		}
		return r, nil
	}
	ref, ok := ParseRepoRef(s)
	if !ok {
		switch {
		case statErr == nil:
			return nil, fail(ErrMissingFile, "", "%s is not a folder (want a snapshot folder or org/name[@revision])", display(s))
		case errors.Is(statErr, fs.ErrNotExist):
			return nil, fail(ErrMissingFile, "", "folder %s does not exist and is not org/name[@revision]", display(s))
		default:
			return nil, fmt.Errorf("hfcache: folder %s: %w", display(s), statErr)
		}
	}
	root, source := CacheRoot()
	return resolveIn(root, source, ref, true)
}

// detectAny runs Detect on p, then on its absolute form with symlinks
// resolved, and returns the cache root too.
func detectAny(p string) (root, repo, rev string, ok bool) {
	if root, repo, rev, _, ok = detect(p); ok {
		return
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if abs, err := filepath.Abs(real); err == nil {
			root, repo, rev, _, ok = detect(abs)
		}
	}
	return
}

// Detect recognizes .../models--ORG--NAME/snapshots/<40-hex>[/file] and
// returns repo "ORG/NAME" and the revision (the commit). The match is on
// the path's text (a relative path is made absolute first; symlinks are not
// followed); the innermost such pattern wins. ORG and NAME must be valid
// repo id parts (see ParseRepoRef); datasets--/spaces-- folders are not
// recognized.
func Detect(path string) (repo, revision string, ok bool) {
	_, repo, revision, _, ok = detect(path)
	return
}

// detect is Detect also returning the cache root (the folder above
// models--ORG--NAME) and the '/'-separated path below the snapshot folder
// ("" for the folder itself).
func detect(path string) (root, repo, revision, rel string, ok bool) {
	if path == "" || strings.ContainsRune(path, 0) {
		return "", "", "", "", false
	}
	p := filepath.Clean(path)
	if !filepath.IsAbs(p) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", "", "", "", false
		}
		p = abs
	}
	vol := filepath.VolumeName(p)
	els := strings.Split(filepath.ToSlash(p[len(vol):]), "/")
	for i := len(els) - 3; i >= 0; i-- {
		if els[i+1] != "snapshots" || !isCommit(els[i+2]) {
			continue
		}
		rest, found := strings.CutPrefix(els[i], "models--")
		if !found {
			continue
		}
		org, name, two := strings.Cut(rest, "--")
		if !two || !validRepoID(org+"/"+name) {
			continue
		}
		root = vol + filepath.FromSlash(strings.Join(els[:i], "/"))
		if root == vol {
			root = vol + string(filepath.Separator)
		}
		return root, org + "/" + name, els[i+2], strings.Join(els[i+3:], "/"), true
	}
	return "", "", "", "", false
}
