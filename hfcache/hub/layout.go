package hub

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// File and folder modes of everything the download writes.
const (
	dirMode  = 0o755
	fileMode = 0o644
)

// cachedirTag is the CACHEDIR.TAG huggingface_hub writes into the cache
// root and into DIR/.cache/huggingface (https://bford.info/cachedir/).
const cachedirTag = "Signature: 8a477f597d28d172789f06886806bc55\n" +
	"# This file is a cache directory tag created by huggingface_hub.\n" +
	"# For information about cache directory tags, see:\n" +
	"#\thttps://bford.info/cachedir/\n"

// RepoFolder is the cache folder name of "org/name": models--org--name.
func RepoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// cacheLayout places a repo in the hub cache as huggingface_hub does:
//
//	<root>/models--ORG--NAME/blobs/<etag>                    file content
//	<root>/models--ORG--NAME/blobs/<etag>.incomplete         partial content (a prefix)
//	<root>/models--ORG--NAME/snapshots/<commit>/<path>       relative symlink into ../../blobs/
//	<root>/models--ORG--NAME/refs/<revision>                 the commit (not for a commit revision)
//	<root>/models--ORG--NAME/trees/<commit>.json             the listing
//	<root>/.locks/models--ORG--NAME/<etag>.lock              per-blob lock
type cacheLayout struct {
	root, repoDir, locks string
}

func newCacheLayout(root, repo string) cacheLayout {
	return cacheLayout{
		root:    root,
		repoDir: filepath.Join(root, RepoFolder(repo)),
		locks:   filepath.Join(root, ".locks", RepoFolder(repo)),
	}
}

func (l cacheLayout) blob(etag string) string { return filepath.Join(l.repoDir, "blobs", etag) }
func (l cacheLayout) snapshot(commit string) string {
	return filepath.Join(l.repoDir, "snapshots", commit)
}
func (l cacheLayout) pointer(commit, path string) string {
	return filepath.Join(l.snapshot(commit), filepath.FromSlash(path))
}
func (l cacheLayout) ref(revision string) string {
	return filepath.Join(l.repoDir, "refs", filepath.FromSlash(revision))
}
func (l cacheLayout) lock(etag string) string { return filepath.Join(l.locks, etag+".lock") }

// localLayout places files in a --local-dir as huggingface_hub's local_dir
// mode does:
//
//	DIR/<path>                                                       the file
//	DIR/.cache/huggingface/download/<path>.metadata                  "<commit>\n<etag>\n<unix time>\n"
//	DIR/.cache/huggingface/download/<path>.lock                      per-file lock
//	DIR/.cache/huggingface/download/<dir>/<h>.<etag>.incomplete      partial content, h = urlsafe-base64(sha1(<name>.metadata))
//	DIR/.cache/huggingface/trees/<commit>.json                       the listing
//	DIR/.cache/huggingface/.gitignore                                "*"
type localLayout struct {
	dir, meta string
}

func newLocalLayout(dir string) localLayout {
	return localLayout{dir: dir, meta: filepath.Join(dir, ".cache", "huggingface")}
}

func (l localLayout) file(path string) string { return filepath.Join(l.dir, filepath.FromSlash(path)) }
func (l localLayout) metadata(path string) string {
	return filepath.Join(l.meta, "download", filepath.FromSlash(path)+".metadata")
}
func (l localLayout) lock(path string) string {
	return filepath.Join(l.meta, "download", filepath.FromSlash(path)+".lock")
}
func (l localLayout) incomplete(path, etag string) string {
	m := l.metadata(path)
	return filepath.Join(filepath.Dir(m), shortHash(filepath.Base(m))+"."+etag+".incomplete")
}

// shortHash is huggingface_hub's _short_hash: the URL-safe base64 (with
// padding) of the sha1 of name.
func shortHash(name string) string {
	s := sha1.Sum([]byte(name))
	return base64.URLEncoding.EncodeToString(s[:])
}

// LocalMetadata is what huggingface_hub records for a file of a
// --local-dir download.
type LocalMetadata struct {
	Commit, ETag string
	// Timestamp is when the metadata was written (Unix seconds).
	Timestamp float64
}

// maxMetadataFile bounds a metadata file read.
const maxMetadataFile = 4096

// ParseLocalMetadata parses a local-dir metadata file: three lines, the
// commit, the etag and a Unix time in seconds (a float). Lines are
// trimmed; more lines are ignored, as huggingface_hub does. Errors wrap
// ErrProtocol.
func ParseLocalMetadata(data []byte) (LocalMetadata, error) {
	if len(data) > maxMetadataFile {
		return LocalMetadata{}, failf(ErrProtocol, "download metadata longer than %d bytes", maxMetadataFile)
	}
	lines := strings.SplitN(string(data), "\n", 4)
	if len(lines) < 3 {
		return LocalMetadata{}, failf(ErrProtocol, "download metadata has %d lines, want 3", len(lines))
	}
	m := LocalMetadata{Commit: strings.TrimSpace(lines[0]), ETag: strings.TrimSpace(lines[1])}
	ts, err := strconv.ParseFloat(strings.TrimSpace(lines[2]), 64)
	if err != nil || ts != ts || ts < 0 || ts > 1e12 {
		return LocalMetadata{}, failf(ErrProtocol, "download metadata timestamp %s is not a Unix time", shown(strings.TrimSpace(lines[2])))
	}
	m.Timestamp = ts
	if !isCommit(m.Commit) || !(isHex(m.ETag, 40) || isHex(m.ETag, 64)) {
		return LocalMetadata{}, failf(ErrProtocol, "download metadata commit %s or etag %s malformed", shown(m.Commit), shown(m.ETag))
	}
	return m, nil
}

// formatLocalMetadata renders metadata as huggingface_hub writes it.
func formatLocalMetadata(commit, etag string, t time.Time) []byte {
	ts := strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', -1, 64)
	if !strings.Contains(ts, ".") {
		ts += ".0"
	}
	return []byte(commit + "\n" + etag + "\n" + ts + "\n")
}

// readLocalMetadata returns the metadata recorded for path, or false.
func (l localLayout) readLocalMetadata(path string) (LocalMetadata, bool) {
	data, err := readSmall(l.metadata(path), maxMetadataFile)
	if err != nil {
		return LocalMetadata{}, false
	}
	m, err := ParseLocalMetadata(data)
	return m, err == nil
}

// prepare creates DIR/.cache/huggingface with its .gitignore and
// CACHEDIR.TAG (best effort for the two files, as huggingface_hub).
func (l localLayout) prepare() error {
	if err := mkdirAll(l.meta); err != nil {
		return err
	}
	writeIfMissing(filepath.Join(l.meta, ".gitignore"), []byte("*"))
	writeIfMissing(filepath.Join(l.meta, "CACHEDIR.TAG"), []byte(cachedirTag))
	return nil
}

// mkdirAll creates a folder (and its parents) with dirMode.
func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	return nil
}

// writeIfMissing writes a small file unless it exists; errors are ignored.
func writeIfMissing(p string, data []byte) {
	if _, err := os.Lstat(p); err == nil {
		return
	}
	_ = writeFileAtomic(p, data)
}

// tmpName returns a hidden temporary name beside p.
func tmpName(p string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+"."+hex.EncodeToString(b[:])+".tmp")
}

// writeFileAtomic writes data to p through a temporary file and a rename,
// creating the parent folders.
func writeFileAtomic(p string, data []byte) error {
	if err := mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	tmp := tmpName(p)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, fileMode)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	return nil
}

// readSmall reads a file of at most limit bytes.
func readSmall(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, limit+1)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nil, err
	}
	if int64(n) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, limit)
	}
	return buf[:n], nil
}

// writeRef records commit in refs/<revision> (atomically, only when it
// changes), as huggingface_hub does for a branch or tag.
func writeRef(p, commit string) error {
	if cur, err := readSmall(p, 256); err == nil && string(cur) == commit {
		return nil
	}
	return writeFileAtomic(p, []byte(commit))
}

// linkPointer makes pointer a relative symlink to blob (replacing whatever
// is there atomically), as huggingface_hub's _create_symlink.
func linkPointer(pointer, blob string) error {
	rel, err := filepath.Rel(filepath.Dir(pointer), blob)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if cur, err := os.Readlink(pointer); err == nil && cur == rel {
		return nil
	}
	if err := mkdirAll(filepath.Dir(pointer)); err != nil {
		return err
	}
	tmp := tmpName(pointer)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	if err := os.Rename(tmp, pointer); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	return nil
}

// fileSize returns the size of a regular file (following symlinks), or
// false when there is none.
func fileSize(p string) (int64, bool) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
