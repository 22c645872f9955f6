package dgq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"
)

// Pack is an opened, validated self-contained pack. Its blob is mapped
// read-only; tensor bytes are slices of the mapping.
type Pack struct {
	Dir      string
	Manifest *Manifest
	blob     []byte
	index    map[string]int
	release  func([]byte) error
}

// NewPackView wraps a canonical address space assembled elsewhere (the
// overlay loader's view of a layered pack) as a Pack. The caller has
// validated m; release is called by Close.
func NewPackView(dir string, m *Manifest, blob []byte, release func([]byte) error) (*Pack, error) {
	if int64(len(blob)) != m.CanonicalSize() {
		return nil, fmt.Errorf("dgq: %s: view holds %d bytes, the tensors end at %d", dir, len(blob), m.CanonicalSize())
	}
	if err := checkAligned(blob); err != nil {
		return nil, fmt.Errorf("dgq: %s: %w", dir, err)
	}
	p := &Pack{Dir: dir, Manifest: m, blob: blob, index: make(map[string]int, len(m.Tensors)), release: release}
	for i, t := range m.Tensors {
		p.index[t.Name] = i
	}
	return p, nil
}

// checkAligned asserts the view's base address is 64-byte aligned, so every
// canonical offset (a multiple of 64) is an aligned address for typed loads.
func checkAligned(b []byte) error {
	if len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
		return fmt.Errorf("blob base address %p is not 64-byte aligned", &b[0])
	}
	return nil
}

// ReadManifest reads and decodes dir's manifest without validating it.
func ReadManifest(dir string) (*Manifest, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory (a pack is a directory)", ErrManifest, dir)
	}
	p := filepath.Join(dir, ManifestName)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if st, serr := os.Stat(dir); serr != nil {
				return nil, fmt.Errorf("%w: %s does not exist", ErrManifest, dir)
			} else if !st.IsDir() {
				return nil, fmt.Errorf("%w: %s is not a directory", ErrManifest, dir)
			}
			return nil, fmt.Errorf("%w: %s has no %s (not a dgq pack)", ErrManifest, dir, ManifestName)
		}
		return nil, fmt.Errorf("dgq: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dgq: read %s: %w", p, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

// Open reads dir's manifest, validates it against every rule and the blob's
// size, and maps the blob. A pack that breaks any rule is refused with an
// *InvalidError listing the findings before any tensor byte is exposed.
func Open(dir string) (*Pack, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if m.Layered() {
		return nil, fmt.Errorf("%w: %s references external files; open it with the overlay loader", ErrLayered, dir)
	}
	blobPath := filepath.Join(dir, filepath.Base(m.Blob))
	f, err := os.Open(blobPath)
	if err != nil {
		findings := append(Validate(m, -1), Finding{Kind: KindBlob, Message: fmt.Sprintf("blob %s cannot be opened: %v", m.Blob, err)})
		return nil, &InvalidError{Dir: dir, Findings: findings}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dgq: %w", err)
	}
	if findings := Validate(m, st.Size()); len(findings) > 0 {
		return nil, &InvalidError{Dir: dir, Findings: findings}
	}
	blob, err := mapFile(f, st.Size())
	if err != nil {
		return nil, err
	}
	p, err := NewPackView(dir, m, blob, unmapFile)
	if err != nil {
		unmapFile(blob)
		return nil, err
	}
	return p, nil
}

// Close releases the blob. Slices obtained from the pack become invalid.
func (p *Pack) Close() error {
	var err error
	if p.release != nil && p.blob != nil {
		err = p.release(p.blob)
	}
	p.blob = nil
	return err
}

// Blob returns the whole mapped blob (canonical address space).
func (p *Pack) Blob() []byte { return p.blob }

// Tensor returns the manifest entry of name.
func (p *Pack) Tensor(name string) (*Tensor, bool) {
	i, ok := p.index[name]
	if !ok {
		return nil, false
	}
	return &p.Manifest.Tensors[i], true
}

// TensorBytes returns the stored bytes of name (a slice of the mapping).
func (p *Pack) TensorBytes(name string) ([]byte, error) {
	t, ok := p.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("dgq: %s: no tensor %q", p.Dir, name)
	}
	return p.blob[t.Offset : t.Offset+t.Size], nil
}

func statBlob(dir string, m *Manifest) (int64, error) {
	st, err := os.Stat(filepath.Join(dir, filepath.Base(m.Blob)))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// PackFile is a validated pack whose own blob file is read with positional
// reads instead of being mapped: what streaming tools (repack) use, so their
// memory does not grow with the pack.
type PackFile struct {
	Dir      string
	Manifest *Manifest
	Blob     *os.File
}

// OpenWithoutMapping reads and validates dir's manifest against its blob
// file (self-contained or layered) and opens the blob for reading.
func OpenWithoutMapping(dir string) (*PackFile, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, filepath.Base(m.Blob)))
	if err != nil {
		return nil, &InvalidError{Dir: dir, Findings: append(Validate(m, -1), Finding{Kind: KindBlob, Message: err.Error()})}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dgq: %w", err)
	}
	if findings := Validate(m, st.Size()); len(findings) > 0 {
		f.Close()
		return nil, &InvalidError{Dir: dir, Findings: findings}
	}
	return &PackFile{Dir: dir, Manifest: m, Blob: f}, nil
}

// Close closes the blob file.
func (p *PackFile) Close() error { return p.Blob.Close() }
