package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Bounds on what the Hub (or a tree cache file) may describe.
const (
	maxPathBytes    = 4096
	maxSegmentBytes = 255
	maxEntries      = 1 << 20
	maxFileSize     = 1 << 50 // 1 PiB: a size beyond is a malformed answer
)

// Entry is one file of a repository at a commit, as the Hub's tree
// listing describes it.
type Entry struct {
	// Path is the '/'-separated path in the repository.
	Path string
	// Size is the file's size in bytes (for an LFS file, lfs.size).
	Size int64
	// OID is the git blob id (40 hex digits); for an LFS file it is the
	// pointer's.
	OID string
	// LFS is set for a file stored in LFS (or Xet).
	LFS bool
	// SHA256 is the content's sha256 (64 hex digits), for an LFS file only.
	SHA256 string
	// XetHash is the Xet content hash when the Hub gives one (kept for the
	// tree cache only).
	XetHash string
}

// ETag returns the name of the file's blob in the cache, as
// huggingface_hub names it: the sha256 for an LFS file, the git blob id
// otherwise.
func (e Entry) ETag() string {
	if e.LFS {
		return e.SHA256
	}
	return e.OID
}

// treeItem is one element of a tree listing page.
type treeItem struct {
	Type    string   `json:"type"`
	OID     string   `json:"oid"`
	Size    *int64   `json:"size"`
	Path    string   `json:"path"`
	LFS     *lfsInfo `json:"lfs"`
	XetHash string   `json:"xetHash"`
}

type lfsInfo struct {
	OID  string `json:"oid"`
	Size *int64 `json:"size"`
}

// ParseTreePage parses one page of the Hub's tree listing
// (GET /api/models/{repo}/tree/{revision}?recursive=true): a JSON array of
// {type, oid, size, path, lfs: {oid, size, pointerSize}}. Folders
// ("directory") and other non-file entries are skipped. Every file is
// checked: a safe relative path (ValidRepoPath), a 40-hex oid, a size in
// range and, for LFS, a 64-hex sha256 and a size. Errors wrap ErrProtocol
// and name the entry.
func ParseTreePage(data []byte) ([]Entry, error) {
	var items []treeItem
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&items); err != nil {
		return nil, failf(ErrProtocol, "tree listing is not a JSON array of entries: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, failf(ErrProtocol, "tree listing has data after the JSON array")
	}
	if len(items) > maxEntries {
		return nil, failf(ErrProtocol, "tree listing page has %d entries (at most %d)", len(items), maxEntries)
	}
	out := make([]Entry, 0, len(items))
	for _, it := range items {
		if it.Type != "file" {
			continue
		}
		e := Entry{Path: it.Path, OID: it.OID, XetHash: it.XetHash}
		if it.Size == nil {
			return nil, failf(ErrProtocol, "tree entry %s has no size", shown(it.Path))
		}
		e.Size = *it.Size
		if it.LFS != nil {
			if it.LFS.Size == nil {
				return nil, failf(ErrProtocol, "tree entry %s: lfs has no size", shown(it.Path))
			}
			e.LFS, e.SHA256, e.Size = true, it.LFS.OID, *it.LFS.Size
		}
		if err := e.validate(); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// validate checks an entry's fields.
func (e Entry) validate() error {
	if err := ValidRepoPath(e.Path); err != nil {
		return err
	}
	if !isHex(e.OID, 40) {
		return failf(ErrProtocol, "tree entry %s: oid %s is not 40 lower-case hex digits", e.Path, shown(e.OID))
	}
	if e.Size < 0 || e.Size > maxFileSize {
		return failf(ErrProtocol, "tree entry %s: size %d out of range", e.Path, e.Size)
	}
	if e.LFS && !isHex(e.SHA256, 64) {
		return failf(ErrProtocol, "tree entry %s: lfs oid %s is not 64 lower-case hex digits", e.Path, shown(e.SHA256))
	}
	if !e.LFS && e.SHA256 != "" {
		return failf(ErrProtocol, "tree entry %s: sha256 without lfs", e.Path)
	}
	if len(e.XetHash) > 256 {
		return failf(ErrProtocol, "tree entry %s: xetHash too long", e.Path)
	}
	return nil
}

// ValidRepoPath checks a file path of a repository before it is used as a
// path below the snapshot folder or --local-dir: '/'-separated, relative,
// valid UTF-8, at most 4096 bytes with elements of at most 255; no element
// empty, "." or ".."; no NUL, control character or backslash. Errors wrap
// ErrProtocol.
func ValidRepoPath(p string) error {
	bad := func(why string) error {
		return failf(ErrProtocol, "repo path %s %s", shown(p), why)
	}
	switch {
	case p == "":
		return bad("is empty")
	case len(p) > maxPathBytes:
		return bad(fmt.Sprintf("is longer than %d bytes", maxPathBytes))
	case !validUTF8(p):
		return bad("is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("is absolute")
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return bad("holds a control character or a backslash")
		}
	}
	for _, el := range strings.Split(p, "/") {
		switch {
		case el == "" || el == "." || el == "..":
			return bad("has an empty, \".\" or \"..\" element")
		case len(el) > maxSegmentBytes:
			return bad(fmt.Sprintf("has an element longer than %d bytes", maxSegmentBytes))
		}
	}
	return nil
}

// checkListing rejects a listing with the same path twice or a file that
// is also a folder of another ("a" and "a/b"), which cannot both exist on
// disk.
func checkListing(entries []Entry) error {
	if len(entries) > maxEntries {
		return failf(ErrProtocol, "tree listing has %d files (at most %d)", len(entries), maxEntries)
	}
	files := make(map[string]bool, len(entries))
	for _, e := range entries {
		if files[e.Path] {
			return failf(ErrProtocol, "tree listing names %s twice", e.Path)
		}
		files[e.Path] = true
	}
	for _, e := range entries {
		for i := strings.IndexByte(e.Path, '/'); i >= 0; {
			if files[e.Path[:i]] {
				return failf(ErrProtocol, "tree listing has both a file %s and a file %s inside it", e.Path[:i], e.Path)
			}
			j := strings.IndexByte(e.Path[i+1:], '/')
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return nil
}

// The tree cache: huggingface_hub (since 1.22) keeps the listing of every
// commit it downloaded in <repo folder>/trees/<commit>.json (for a
// local-dir download, DIR/.cache/huggingface/trees/<commit>.json), so that
// a later run needs no listing request and an offline run can tell whether
// a snapshot is complete.

// treeCacheVersion is the format_version huggingface_hub writes.
const treeCacheVersion = 1

// maxTreeCache bounds a tree cache file read.
const maxTreeCache = 256 << 20

type treeCacheFile struct {
	FormatVersion int                       `json:"format_version"`
	Files         map[string]treeCacheEntry `json:"files"`
}

type treeCacheEntry struct {
	Size      *int64 `json:"size"`
	BlobID    string `json:"blob_id"`
	LFSSHA256 string `json:"lfs_sha256,omitempty"`
	LFSSize   *int64 `json:"lfs_size,omitempty"`
	XetHash   string `json:"xet_hash,omitempty"`
}

// treeCachePath is the tree cache file of commit under folder.
func treeCachePath(folder, commit string) string {
	return filepath.Join(folder, "trees", commit+".json")
}

// ParseTreeCache parses a tree cache file (huggingface_hub's
// trees/<commit>.json: {"format_version": 1, "files": {path: {size,
// blob_id, lfs_sha256, lfs_size, xet_hash}}}) into entries sorted by path,
// checked as ParseTreePage checks a listing. Errors wrap ErrProtocol.
func ParseTreeCache(data []byte) ([]Entry, error) {
	var tc treeCacheFile
	if err := json.Unmarshal(data, &tc); err != nil {
		return nil, failf(ErrProtocol, "tree cache: %v", err)
	}
	if tc.FormatVersion != treeCacheVersion {
		return nil, failf(ErrProtocol, "tree cache: format_version %d (want %d)", tc.FormatVersion, treeCacheVersion)
	}
	if tc.Files == nil {
		return nil, failf(ErrProtocol, "tree cache: no files object")
	}
	out := make([]Entry, 0, len(tc.Files))
	for p, f := range tc.Files {
		if f.Size == nil {
			return nil, failf(ErrProtocol, "tree cache: %s has no size", shown(p))
		}
		e := Entry{Path: p, Size: *f.Size, OID: f.BlobID, XetHash: f.XetHash}
		if f.LFSSHA256 != "" {
			if f.LFSSize == nil {
				return nil, failf(ErrProtocol, "tree cache: %s has lfs_sha256 without lfs_size", shown(p))
			}
			e.LFS, e.SHA256, e.Size = true, f.LFSSHA256, *f.LFSSize
		}
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("tree cache: %w", err)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	if err := checkListing(out); err != nil {
		return nil, err
	}
	return out, nil
}

// readTreeCache returns the cached listing of commit under folder, or nil
// when there is none or it is unusable (a malformed file is ignored, as
// huggingface_hub ignores it, and listed again).
func readTreeCache(folder, commit string) []Entry {
	f, err := os.Open(treeCachePath(folder, commit))
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTreeCache+1))
	if err != nil || len(data) > maxTreeCache {
		return nil
	}
	entries, err := ParseTreeCache(data)
	if err != nil {
		return nil
	}
	return entries
}

// encodeTreeCache renders entries as huggingface_hub writes a tree cache
// file (paths sorted, one-space indent).
func encodeTreeCache(entries []Entry) ([]byte, error) {
	tc := treeCacheFile{FormatVersion: treeCacheVersion, Files: make(map[string]treeCacheEntry, len(entries))}
	for _, e := range entries {
		size := e.Size
		te := treeCacheEntry{Size: &size, BlobID: e.OID, XetHash: e.XetHash}
		if e.LFS {
			lsize := e.Size
			te.LFSSHA256, te.LFSSize = e.SHA256, &lsize
		}
		tc.Files[e.Path] = te
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(tc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeTreeCache stores the listing of commit under folder atomically.
func writeTreeCache(folder, commit string, entries []Entry) error {
	data, err := encodeTreeCache(entries)
	if err != nil {
		return fmt.Errorf("hub: tree cache: %w", err)
	}
	return writeFileAtomic(treeCachePath(folder, commit), data)
}
