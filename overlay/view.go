package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
)

// Options configures OpenWith.
type Options struct {
	// SkipDigests trusts the tensor digests instead of verifying them (and
	// skips the side-file checks): loading then reads no tensor bytes.
	SkipDigests bool
	Workers     int // hashing goroutines; 0 = GOMAXPROCS
}

// Open loads any pack and proves it before returning it: every structural
// rule, every pin of a layered pack, every side file, and every tensor's
// digest (in parallel, at disk speed). A pack that fails anything is refused
// with an *dgq.InvalidError listing all findings (or a stale-cache error).
func Open(dir string) (*dgq.Pack, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options. A self-contained pack is mapped by dgq.Open;
// a layered pack is validated, its external pins checked, and its canonical
// address space assembled (see the package doc). Either way the result is a
// *dgq.Pack whose Blob() is the canonical, 64-byte-aligned address space.
func OpenWith(dir string, o Options) (*dgq.Pack, error) {
	return OpenContext(context.Background(), dir, o)
}

// OpenContext is OpenWith whose digest verification (the long part: every
// tensor byte hashed) stops when ctx is done, returning an error that wraps
// ctx.Err(); nothing stays open then.
func OpenContext(ctx context.Context, dir string, o Options) (*dgq.Pack, error) {
	p, err := open(dir)
	if err != nil || o.SkipDigests {
		return p, err
	}
	findings := append(dgq.CheckFiles(dir, p.Manifest), dgq.PaddingFindings(p.Manifest, p.Blob())...)
	df, err := dgq.AuditDigests(ctx, p.Manifest, p.Blob(), dgq.AuditOptions{Workers: o.Workers})
	if err != nil {
		p.Close()
		return nil, err
	}
	if findings = append(findings, df...); len(findings) > 0 {
		p.Close()
		if p.Manifest.Layered() {
			return nil, loadError(dir, p.Manifest, findings) // a changed shard is stale, not invalid
		}
		return nil, &dgq.InvalidError{Dir: dir, Findings: findings}
	}
	return p, nil
}

func open(dir string) (*dgq.Pack, error) {
	m, err := dgq.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if !m.Layered() {
		return dgq.Open(dir)
	}
	st, err := os.Stat(filepath.Join(dir, filepath.Base(m.Blob)))
	size := int64(-1)
	if err == nil {
		size = st.Size()
	}
	if findings := dgq.Validate(m, size); len(findings) > 0 || err != nil {
		if err != nil {
			findings = append(findings, dgq.Finding{Kind: dgq.KindBlob, Message: fmt.Sprintf("local blob %s cannot be read: %v", m.Blob, err)})
		}
		return nil, &dgq.InvalidError{Dir: dir, Findings: findings}
	}
	view, release, err := assemble(dir, m)
	if err != nil {
		return nil, err
	}
	p, err := dgq.NewPackView(dir, m, view, release)
	if err != nil {
		release(view)
		return nil, err
	}
	return p, nil
}

// assemble builds the canonical view of a validated layered pack.
func assemble(dir string, m *dgq.Manifest) ([]byte, func([]byte) error, error) {
	local, err := os.Open(filepath.Join(dir, filepath.Base(m.Blob)))
	if err != nil {
		return nil, nil, fmt.Errorf("overlay: %w", err)
	}
	defer local.Close()
	files, err := openPins(dir, m)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	size := m.CanonicalSize()
	view, release, err := reserve(size)
	if err != nil {
		return nil, nil, err
	}
	split, hasSplit := m.Split()
	tailMapped := false
	if mirroredTail(m) {
		tailMapped = mapTail(view, local, *m.LocalExpertSplit, split) == nil
	}
	for _, t := range m.Tensors {
		if tailMapped && t.Class == layout.Experts {
			continue
		}
		src, off := io.ReaderAt(local), t.Offset // no source: the canonical offset of the own blob
		if s := t.Source; s != nil {
			off = s.Offset
			if s.Kind == dgq.SourceExternal {
				src = files[s.File]
			}
		}
		if err := readFull(src, view[t.Offset:t.Offset+t.Size], off); err != nil {
			release(view)
			return nil, nil, fmt.Errorf("overlay: %s: read tensor %s: %w", dir, t.Name, err)
		}
	}
	if !hasSplit {
		split = size
	}
	protect(view[:split])
	return view, release, nil
}

// openPins checks every external file's pin and opens it; all stale files
// are reported together.
func openPins(dir string, m *dgq.Manifest) (map[string]*os.File, error) {
	files := map[string]*os.File{}
	var errs []error
	for _, f := range m.ExternalFiles {
		p, err := resolvePin(dir, m.BaseModel, f)
		if err == nil {
			var fh *os.File
			if fh, err = os.Open(p); err == nil {
				files[f.ID] = fh
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		for _, f := range files {
			f.Close()
		}
		return nil, errors.Join(errs...)
	}
	return files, nil
}

// mirroredTail reports whether every expert tensor is local, so the tail can
// be mapped from the local blob in one piece.
func mirroredTail(m *dgq.Manifest) bool {
	split, ok := m.Split()
	if m.LocalExpertSplit == nil || !ok || m.CanonicalSize() == split {
		return false
	}
	for _, t := range m.Tensors {
		if t.Class == layout.Experts && (t.Source == nil || t.Source.Kind != dgq.SourceLocal) {
			return false
		}
	}
	return true
}

func readFull(r io.ReaderAt, dst []byte, off int64) error {
	n, err := r.ReadAt(dst, off)
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
