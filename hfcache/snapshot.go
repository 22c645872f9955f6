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

// Snapshot is an opened Hugging Face snapshot folder: IndexFile and the
// shards it names, or a single SingleFile.
type Snapshot struct {
	// Dir is the folder as given to OpenSnapshot.
	Dir string
	// Shards is sorted by Name.
	Shards []*Shard
	// Index is the parsed IndexFile, nil for a single-file snapshot.
	Index *Index

	tensors []TensorRef // sorted by name
}

// Shard is one safetensors file of a snapshot, mapped read-only.
type Shard struct {
	// Name is the path relative to the snapshot folder, '/'-separated, as
	// the index spells it.
	Name string
	// Size is the file size in bytes.
	Size int64
	// Header is the validated safetensors header.
	Header *Header

	data   []byte // the whole file; nil once closed
	mapped bool   // data is an mmap to unmap on Close
}

// TensorRef is one tensor with the shard that holds it.
type TensorRef struct {
	TensorInfo
	Shard *Shard
}

// OpenSnapshot opens the snapshot folder dir. It maps every shard read-only
// (symlinks, such as those of the hub cache pointing into ../../blobs/, are
// followed), parses every header and cross-checks the index: every tensor of
// the index is present in the shard the index names, no shard holds a
// tensor the index does not list, no tensor appears in two shards, and
// every shard the index names exists. No weight bytes are read, only
// headers (on platforms without mmap the shards are read into memory).
//
// When dir holds both SingleFile and IndexFile, SingleFile is used, as
// transformers does. Shards not named by the index are ignored.
//
// Errors name the file: ErrMissingFile for a missing folder, index or shard
// (including a dangling symlink, as an interrupted download leaves; inside
// a hub cache snapshot, as Detect recognizes it, the message ends with
// "; fix: dgq download ORG/NAME --revision COMMIT [--include FILE]"),
// ErrIndex for a malformed index, ErrSafetensors (and the sentinels that
// wrap it) for a malformed shard, ErrInventory when index and shards
// disagree. The Snapshot must be closed.
func OpenSnapshot(dir string) (*Snapshot, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fail(ErrMissingFile, "", "snapshot folder %s does not exist%s", display(dir), fixFor(dir))
		}
		return nil, fmt.Errorf("hfcache: snapshot folder %s: %w", display(dir), err)
	}
	if !fi.IsDir() {
		return nil, fail(ErrMissingFile, "", "snapshot folder %s is not a folder", display(dir))
	}

	s := &Snapshot{Dir: dir}
	var names []string
	singlePath := filepath.Join(dir, SingleFile)
	indexPath := filepath.Join(dir, IndexFile)
	switch {
	case lexists(singlePath):
		names = []string{SingleFile}
	case lexists(indexPath):
		data, err := readCapped(indexPath, MaxIndexBytes, ErrIndex, "index")
		if err != nil {
			return nil, err
		}
		if s.Index, err = parseIndex(data, display(indexPath)); err != nil {
			return nil, err
		}
		for _, shard := range s.Index.WeightMap {
			names = append(names, shard)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	default:
		return nil, fail(ErrMissingFile, "", "snapshot folder %s holds neither %s nor %s%s", display(dir), IndexFile, SingleFile, fixFor(dir))
	}

	for _, name := range names {
		sh, err := openShard(dir, name)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Shards = append(s.Shards, sh)
	}
	if err := s.inventory(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// inventory cross-checks the shards' headers against the index and builds
// the tensor list.
func (s *Snapshot) inventory() error {
	holder := make(map[string]*Shard)
	for _, sh := range s.Shards {
		for _, t := range sh.Header.Tensors {
			if other, dup := holder[t.Name]; dup {
				return fail(ErrInventory, "", "tensor %s is in both shard %s and shard %s", quote(t.Name), display(other.Name), display(sh.Name))
			}
			holder[t.Name] = sh
			s.tensors = append(s.tensors, TensorRef{TensorInfo: t, Shard: sh})
		}
	}
	if s.Index != nil {
		where := display(filepath.Join(s.Dir, IndexFile))
		listed := make([]string, 0, len(s.Index.WeightMap))
		for name := range s.Index.WeightMap {
			listed = append(listed, name)
		}
		slices.Sort(listed)
		for _, name := range listed {
			want := s.Index.WeightMap[name]
			got, ok := holder[name]
			switch {
			case !ok:
				return fail(ErrInventory, where, "tensor %s is listed in shard %s, which does not hold it", quote(name), display(want))
			case got.Name != want:
				return fail(ErrInventory, where, "tensor %s is listed in shard %s but is in shard %s", quote(name), display(want), display(got.Name))
			}
		}
		for _, t := range s.tensors {
			if _, ok := s.Index.WeightMap[t.Name]; !ok {
				return fail(ErrInventory, where, "shard %s holds tensor %s, which the index does not list", display(t.Shard.Name), quote(t.Name))
			}
		}
	}
	slices.SortFunc(s.tensors, func(a, b TensorRef) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// openShard maps and parses the shard dir/name.
func openShard(dir, name string) (*Shard, error) {
	p := filepath.Join(dir, filepath.FromSlash(name))
	where := "shard " + display(p)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, missing(p, "shard")
		}
		return nil, fmt.Errorf("hfcache: %s: %w", where, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hfcache: %s: %w", where, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fail(ErrSafetensors, where, "not a regular file (%s)", fi.Mode().Type())
	}
	data, mapped, err := mapFile(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("hfcache: %s: %w", where, err)
	}
	sh := &Shard{Name: name, Size: fi.Size(), data: data, mapped: mapped}
	if sh.Header, err = parseHeader(data, where); err != nil {
		sh.close()
		return nil, err
	}
	return sh, nil
}

// Close unmaps every shard. Slices returned by Bytes are invalid afterwards.
// Close is idempotent.
func (s *Snapshot) Close() error {
	var errs []error
	for _, sh := range s.Shards {
		if err := sh.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (sh *Shard) close() error {
	data, mapped := sh.data, sh.mapped
	sh.data, sh.mapped = nil, false
	if mapped {
		if err := unmapFile(data); err != nil {
			return fmt.Errorf("hfcache: shard %s: munmap: %w", display(sh.Name), err)
		}
	}
	return nil
}

// Tensors returns every tensor of the snapshot sorted by name (a new slice
// each call).
func (s *Snapshot) Tensors() []TensorRef {
	return slices.Clone(s.tensors)
}

// Bytes returns the tensor's bytes as a slice of the shard's read-only
// mapping: writing to it faults. It is valid until the Snapshot is closed;
// after Close it returns nil.
func (t TensorRef) Bytes() []byte {
	if t.Shard == nil || t.Shard.data == nil {
		return nil
	}
	end := t.Offset + t.Size
	if t.Offset < 0 || t.Size < 0 || end < t.Offset || end > int64(len(t.Shard.data)) {
		return nil
	}
	return t.Shard.data[t.Offset:end:end]
}

// Release tells the kernel that the pages of [off, off+size) of this shard
// (file offsets, as in TensorInfo.Offset) are no longer needed, so that a
// streaming reader's resident memory stays flat: madvise(MADV_DONTNEED) on
// the pages lying wholly inside the range (and the final partial page of
// the file). The data stays readable; it is read again from the page cache
// or the disk. Errors are ignored; out-of-range parts are clipped.
func (sh *Shard) Release(off, size int64) {
	lo, hi, ok := sh.clip(off, size)
	if !ok {
		return
	}
	pg := pageSize()
	lo = (lo + pg - 1) / pg * pg
	if hi != int64(len(sh.data)) {
		hi = hi / pg * pg
	}
	if lo < hi {
		advise(sh.data[lo:hi], true)
	}
}

// WillNeed asks the kernel to read [off, off+size) of this shard ahead
// (madvise MADV_WILLNEED on the pages overlapping the range). Errors are
// ignored; out-of-range parts are clipped.
func (sh *Shard) WillNeed(off, size int64) {
	lo, hi, ok := sh.clip(off, size)
	if !ok {
		return
	}
	pg := pageSize()
	lo = lo / pg * pg
	advise(sh.data[lo:hi], false)
}

// clip intersects [off, off+size) with the mapping.
func (sh *Shard) clip(off, size int64) (lo, hi int64, ok bool) {
	n := int64(len(sh.data))
	if !sh.mapped || size <= 0 || off >= n {
		return 0, 0, false
	}
	lo, hi = max(off, 0), n
	if off+size > off && off+size < n { // no overflow, inside
		hi = off + size
	}
	return lo, hi, lo < hi
}

// ReadFile reads a small side file of the snapshot (config.json,
// tokenizer.json …), name being relative to Dir and '/'-separated. A file
// larger than maxBytes is refused with ErrFileTooLarge; a missing one gives
// ErrMissingFile.
func (s *Snapshot) ReadFile(name string, maxBytes int64) ([]byte, error) {
	if err := checkRelPath(name); err != nil {
		return nil, fmt.Errorf("hfcache: file name %s %v", quote(name), err)
	}
	return readCapped(filepath.Join(s.Dir, filepath.FromSlash(name)), maxBytes, ErrFileTooLarge, "file")
}

// readCapped reads a regular file of at most maxBytes; tooLarge is the
// sentinel for a bigger one, what names the file's role.
func readCapped(p string, maxBytes int64, tooLarge error, what string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, missing(p, what)
		}
		return nil, fmt.Errorf("hfcache: %s %s: %w", what, display(p), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hfcache: %s %s: %w", what, display(p), err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("hfcache: %s %s is not a regular file", what, display(p))
	}
	if fi.Size() > maxBytes {
		return nil, fail(tooLarge, "", "%s %s is %d bytes, over the %d-byte cap", what, display(p), fi.Size(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("hfcache: %s %s: %w", what, display(p), err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fail(tooLarge, "", "%s %s grew past the %d-byte cap while being read", what, display(p), maxBytes)
	}
	return data, nil
}

// missing describes a file that cannot be opened because it does not exist,
// telling a dangling symlink (an interrupted hub download) apart. Inside a
// hub cache snapshot the message ends with the fix, "dgq download ORG/NAME
// --revision COMMIT --include FILE".
func missing(p, what string) error {
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		return fail(ErrMissingFile, "", "%s %s is a dangling symlink to %s (incomplete download?)%s", what, display(p), display(target), fixFor(p))
	}
	return fail(ErrMissingFile, "", "%s %s does not exist%s", what, display(p), fixFor(p))
}

// lexists reports whether p exists as a directory entry (a dangling symlink
// counts, so that it is reported rather than skipped).
func lexists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
