package dgq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// keepUserFiles carries the files of the pack at old that are not pack
// files into the staging directory tmp before old is replaced (--force): a
// README.md holding the pack's model card, a .gitattributes, a licence, a
// verify report, folders. Pack files are the manifest, anything the old
// manifest names (blob, side files, a pack_bin beside it), blob-like files
// (*.bin, model.dgq*) and whatever the new pack writes under the same name,
// which the new pack replaces. Regular files are hard-linked (copied where
// links are not possible), so the old pack stays intact until the swap. It
// returns the names kept.
func keepUserFiles(old, tmp string) ([]string, error) {
	entries, err := os.ReadDir(old)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("dgq: read %s: %w", old, err)
	}
	packFiles := map[string]bool{ManifestName: true}
	if m, err := ReadManifest(old); err == nil {
		packFiles[filepath.Base(m.Blob)] = true
		for _, f := range m.SideFiles() {
			packFiles[f.Name] = true
		}
		for _, f := range m.ExternalFiles {
			if f.Role == RolePackBin && !filepath.IsAbs(f.Path) && filepath.Dir(filepath.FromSlash(f.Path)) == "." {
				packFiles[filepath.Base(f.Path)] = true
			}
		}
	}
	var kept []string
	for _, e := range entries {
		n := e.Name()
		if packFiles[n] || strings.HasSuffix(n, ".bin") || strings.HasPrefix(n, "model.dgq") {
			continue
		}
		dst := filepath.Join(tmp, n)
		if _, err := os.Lstat(dst); err == nil {
			continue // the new pack writes this name
		}
		if err := copyTree(filepath.Join(old, n), dst); err != nil {
			return kept, fmt.Errorf("dgq: keep %s of the replaced pack: %w", n, err)
		}
		kept = append(kept, n)
	}
	return kept, nil
}

// copyTree copies src (a file, a symlink or a folder) to dst, hard-linking
// regular files where the file system allows it.
func copyTree(src, dst string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case st.IsDir():
		if err := os.Mkdir(dst, st.Mode().Perm()|0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case st.Mode().IsRegular():
		if os.Link(src, dst) == nil {
			return nil
		}
		return copyFile(src, dst, st.Mode().Perm())
	default:
		return nil // a socket or device has no place in a pack: not carried
	}
}

// copyFile copies a regular file's bytes and syncs the copy.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
