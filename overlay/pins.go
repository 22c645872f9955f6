package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
)

// resolvePin finds the file an external entry pins and checks that it is the
// pinned file: present, of the pinned size, with the pinned header digest.
// A mismatch is a *hfcache.StaleError naming the file, what differs and the
// `dgq download` command that restores it.
func resolvePin(packDir string, base *dgq.BaseModel, f dgq.ExternalFile) (string, error) {
	switch f.Role {
	case dgq.RoleHF:
		if base == nil {
			return "", fmt.Errorf("overlay: external file %s is in a Hugging Face snapshot, but the pack names no base_model", f.ID)
		}
		return resolveHF(*base, f)
	case dgq.RolePackBin:
		return resolvePackBin(packDir, f)
	}
	return "", fmt.Errorf("overlay: external file %s has unknown role %q", f.ID, f.Role)
}

func resolveHF(base dgq.BaseModel, f dgq.ExternalFile) (string, error) {
	hint := hfcache.DownloadHint(base.Repo, base.Revision, f.Path)
	root, _ := hfcache.CacheRoot()
	res, err := hfcache.Resolve(root, hfcache.RepoRef{Repo: base.Repo, Revision: base.Revision})
	if err != nil {
		return "", &hfcache.StaleError{Path: base.Repo + "@" + base.Revision + "/" + f.Path, What: "the pinned snapshot is not in the cache at " + root, Hint: hint}
	}
	p := filepath.Join(res.Dir, filepath.FromSlash(f.Path))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		what := "missing"
		if !errors.Is(err, fs.ErrNotExist) {
			what = err.Error()
		}
		return "", &hfcache.StaleError{Path: p, What: what, Hint: hint}
	}
	if !insideDir(real, res.Root) {
		return "", &hfcache.StaleError{Path: p, What: "resolves outside the cache root to " + real, Hint: hint}
	}
	digest, size, err := hfcache.FileHeaderDigest(real)
	switch {
	case err != nil && size == 0:
		return "", &hfcache.StaleError{Path: p, What: err.Error(), Hint: hint}
	case size != f.Size:
		return "", &hfcache.StaleError{Path: p, What: fmt.Sprintf("is %d bytes, the pack pins %d", size, f.Size), Hint: hint}
	case err != nil:
		return "", &hfcache.StaleError{Path: p, What: err.Error(), Hint: hint}
	case f.HeaderSHA256 != "" && digest != f.HeaderSHA256:
		return "", &hfcache.StaleError{Path: p, What: fmt.Sprintf("header sha256 %s differs from the pinned %s", short(digest), short(f.HeaderSHA256)), Hint: hint}
	}
	return real, nil
}

// resolvePackBin finds a blob of another pack: an absolute path, or one
// relative to this pack's directory (the engine's rule).
func resolvePackBin(packDir string, f dgq.ExternalFile) (string, error) {
	p := filepath.FromSlash(f.Path)
	if !filepath.IsAbs(p) {
		p = filepath.Join(packDir, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("overlay: external file %s (%s): %w", f.ID, p, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("overlay: %w", err)
	}
	if st.Size() != f.Size {
		return "", fmt.Errorf("overlay: external file %s is %d bytes, the pack pins %d", p, st.Size(), f.Size)
	}
	if f.HeaderSHA256 != "" { // the engine checks it for every role when present
		if digest, _, err := hfcache.FileHeaderDigest(real); err != nil || digest != f.HeaderSHA256 {
			return "", fmt.Errorf("overlay: external file %s does not match its pinned header_sha256 %s", p, short(f.HeaderSHA256))
		}
	}
	return real, nil
}

func insideDir(p, dir string) bool {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
