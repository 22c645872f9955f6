package dgq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgq-dev/dgq/hfcache"
)

// PackWriter is the one way a pack is written (quantize and both repacks):
// a staging directory beside the output, the blob created through the
// fault-injection seam (createBlob) at its final size, positional tensor
// writes, side files, then the manifest — checked against every rule first —
// and an atomic publish. Until Publish succeeds nothing exists at the output;
// Abort (always safe to defer) removes the staging directory.
type PackWriter struct {
	st        *Staging
	blob      blobFile
	size      int64
	published bool
}

// NewPackWriter stages a pack for out whose own blob file has size bytes.
func NewPackWriter(out string, force bool, size int64) (*PackWriter, error) {
	st, err := NewStaging(out, force)
	if err != nil {
		return nil, err
	}
	blob, err := createBlob(st.Path(BlobName))
	if err != nil {
		st.Abort()
		return nil, fmt.Errorf("dgq: %w", err)
	}
	if err := blob.Truncate(size); err != nil {
		blob.Close()
		st.Abort()
		return nil, fmt.Errorf("dgq: size blob: %w", err)
	}
	return &PackWriter{st: st, blob: blob, size: size}, nil
}

// WriteAt writes tensor bytes at off of the blob (safe for concurrent use
// on disjoint ranges).
func (w *PackWriter) WriteAt(b []byte, off int64) (int, error) { return w.blob.WriteAt(b, off) }

// Staging is the staging directory, for side files.
func (w *PackWriter) Staging() *Staging { return w.st }

// RemovedStale lists the staging directories of killed runs removed from the
// output's parent folder when the writer was made (Staging.RemovedStale).
func (w *PackWriter) RemovedStale() []string { return w.st.RemovedStale() }

// Publish syncs the blob, checks m against every structural rule (a pack
// that breaks one is never published), writes the manifest last and renames
// the staging directory into place.
func (w *PackWriter) Publish(m *Manifest) error {
	if err := w.blob.Sync(); err != nil {
		return fmt.Errorf("dgq: sync blob: %w", err)
	}
	if err := w.blob.Close(); err != nil {
		return fmt.Errorf("dgq: close blob: %w", err)
	}
	if findings := Validate(m, w.size); len(findings) > 0 {
		return &InvalidError{Dir: w.st.out, Findings: findings}
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := w.st.WriteFile(ManifestName, data); err != nil {
		return err
	}
	if err := w.st.Publish(); err != nil {
		return err
	}
	w.published = true
	return nil
}

// Abort removes everything staged unless the pack was published.
func (w *PackWriter) Abort() {
	if w.published {
		return
	}
	w.blob.Close()
	w.st.Abort()
}

// PinShard is the pin of a Hugging Face shard a layered pack references:
// keyed and named by its path inside the snapshot, with its byte size and the
// sha256 of its length prefix and JSON header (the engine's header_sha256).
func PinShard(snapDir, name string) (ExternalFile, error) {
	digest, size, err := hfcache.FileHeaderDigest(filepath.Join(snapDir, name))
	if err != nil {
		return ExternalFile{}, fmt.Errorf("dgq: pin %s: %w", name, err)
	}
	key := filepath.ToSlash(name)
	return ExternalFile{ID: key, Role: RoleHF, Path: key, Size: size, HeaderSHA256: digest}, nil
}

// SideFilesOf lists a pack's side files: those its dgq object records, or,
// for a pack without one (the engine records none), whichever of the
// engine's side files the pack directory holds, with their digests.
func SideFilesOf(dir string, m *Manifest) ([]File, error) {
	if m.DGQ != nil {
		return m.DGQ.Files, nil
	}
	var out []File
	for _, name := range EngineSideFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dgq: side file: %w", err)
		}
		out = append(out, File{Name: name, Size: int64(len(data)), Digest: digestBytes(data)})
	}
	return out, nil
}
