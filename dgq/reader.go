package dgq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Pack is an opened, validated self-contained pack. Its blob is mapped
// read-only; tensor bytes are slices of the mapping.
type Pack struct {
	Dir      string
	Manifest *Manifest
	blob     []byte
	index    map[string]int
}

// ReadManifest reads and decodes dir's manifest without validating it.
func ReadManifest(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestName)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
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
	p := &Pack{Dir: dir, Manifest: m, blob: blob, index: make(map[string]int, len(m.Tensors))}
	for i, t := range m.Tensors {
		p.index[t.Name] = i
	}
	return p, nil
}

// Close unmaps the blob. Slices obtained from the pack become invalid.
func (p *Pack) Close() error {
	err := unmapFile(p.blob)
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
