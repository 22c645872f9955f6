package enginepack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// packBinRef is the self-contained pack a pack_bin layered pack refers to.
type packBinRef struct {
	size    uint64
	blob    []byte
	entries map[string]TensorEntry
}

// loadPackBin reads the blob at path (relative to the new pack directory
// out, unless absolute) and the manifest beside it.
func loadPackBin(out, path string) (*packBinRef, error) {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(out, full)
	}
	if filepath.Clean(full) == filepath.Join(filepath.Clean(out), BlobFile) {
		return nil, fmt.Errorf("enginepack: pack_bin %s is the new pack's own blob", path)
	}
	blob, err := os.ReadFile(full)
	if err != nil {
		return nil, fmt.Errorf("enginepack: read pack_bin blob: %w", err)
	}
	m, err := ReadManifest(filepath.Dir(full))
	if err != nil {
		return nil, fmt.Errorf("enginepack: pack_bin %s: %w", path, err)
	}
	if m.BlobFile != filepath.Base(full) {
		return nil, fmt.Errorf("enginepack: pack_bin %s: its manifest names blob %q", path, m.BlobFile)
	}
	r := &packBinRef{size: uint64(len(blob)), blob: blob, entries: map[string]TensorEntry{}}
	for _, e := range m.Tensors {
		r.entries[e.Name] = e
	}
	return r, nil
}

// locate returns the offset of t's bytes in the referenced blob, checking
// that the referenced pack stores t raw, locally and byte-identical.
func (r *packBinRef) locate(t *Tensor) (uint64, error) {
	e, ok := r.entries[t.Name]
	switch {
	case !ok:
		return 0, fmt.Errorf("enginepack: pack_bin: tensor %s is not in the referenced pack", t.Name)
	case e.Kind != KindRaw || e.Source != nil:
		return 0, fmt.Errorf("enginepack: pack_bin: tensor %s is not a self-contained raw tensor there", t.Name)
	case e.ByteLen != uint64(len(t.Data)) || e.Offset+e.ByteLen > r.size:
		return 0, fmt.Errorf("enginepack: pack_bin: tensor %s has a different length or lies past the blob", t.Name)
	case !bytes.Equal(r.blob[e.Offset:e.Offset+e.ByteLen], t.Data):
		return 0, fmt.Errorf("enginepack: pack_bin: tensor %s differs from the referenced pack's bytes", t.Name)
	}
	return e.Offset, nil
}
