package runtime

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
)

// TensorData is one stored tensor: its bytes are in Format (a slice of the
// loaded pack, not a copy).
type TensorData struct {
	Name   string
	Format codecs.Format
	DType  codecs.DType
	Shape  []int64
	Bytes  []byte
}

// Weights is a loaded pack as the runtime sees it.
type Weights interface {
	// Tensors lists every stored tensor.
	Tensors() []TensorData
	// ReadFile returns a side file of the pack: config.json,
	// generation_config.json, tokenizer*.json.
	ReadFile(name string) ([]byte, error)
}

// PackWeights adapts an opened self-contained pack. The tensors' bytes are
// slices of the pack's mapping: the pack must stay open while the Weights
// (and any Model bound to them) are in use.
func PackWeights(p *dgq.Pack) Weights {
	w := &packWeights{p: p}
	for _, t := range p.Manifest.Tensors {
		b, err := p.TensorBytes(t.Name)
		if err != nil {
			b = nil // Bind reports the size mismatch
		}
		w.tensors = append(w.tensors, TensorData{Name: t.Name, Format: t.Format, DType: t.DType,
			Shape: slices.Clone(t.Shape), Bytes: b})
	}
	return w
}

type packWeights struct {
	p       *dgq.Pack
	tensors []TensorData
}

func (w *packWeights) Tensors() []TensorData { return w.tensors }

// ReadFile reads a side file the manifest lists, from the pack directory.
func (w *packWeights) ReadFile(name string) ([]byte, error) {
	listed := w.p.Manifest.DGQ == nil && slices.Contains(dgq.EngineSideFiles, name) // the engine lists none
	for _, f := range w.p.Manifest.SideFiles() {
		listed = listed || f.Name == name
	}
	if !listed || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("runtime: pack %s has no side file %q: %w", w.p.Dir, name, fs.ErrNotExist)
	}
	b, err := os.ReadFile(filepath.Join(w.p.Dir, name))
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return b, nil
}

// matrix is a bound weight: a tensor seen as a row-major [Rows, K] matrix in
// its stored format. Rows are decoded on demand, never the whole matrix.
type matrix struct {
	name  string
	f     codecs.Format
	dt    codecs.DType
	shape []int64 // as stored (an expert stack's per-matrix data needs its leading dimensions)
	geom  codecs.Matrix
	b     []byte
}

// newMatrix checks that t's bytes decode as its format and dtype say.
func newMatrix(t TensorData) (*matrix, error) {
	if !t.Format.Valid() {
		return nil, fmt.Errorf("unknown format %d", uint8(t.Format))
	}
	if !t.DType.Valid() {
		return nil, fmt.Errorf("unknown dtype %d", uint8(t.DType))
	}
	if err := t.Format.CheckDims(t.Shape); err != nil {
		return nil, err
	}
	g, err := codecs.FlattenShape(t.Shape)
	if err != nil {
		return nil, err
	}
	size, err := t.Format.EncodedSize(t.DType, g)
	if err != nil {
		return nil, err
	}
	if int64(len(t.Bytes)) != size {
		return nil, fmt.Errorf("%s %s %v holds %d bytes, want %d", t.Format, t.DType, t.Shape, len(t.Bytes), size)
	}
	return &matrix{name: t.Name, f: t.Format, dt: t.DType, shape: slices.Clone(t.Shape), geom: g, b: t.Bytes}, nil
}

func (w *matrix) rows() int { return int(w.geom.Rows) }
func (w *matrix) cols() int { return int(w.geom.K) }

// decode writes rows [r0, r0+n) as float32 into dst (n·K values).
func (w *matrix) decode(r0, n int, dst []float32) {
	k := int(w.geom.K)
	if w.f == codecs.Raw {
		rb := k * w.dt.Size()
		if err := codecs.ToFloat32(w.dt, w.b[r0*rb:(r0+n)*rb], dst[:n*k]); err != nil {
			panic("runtime: " + w.name + ": " + err.Error()) // sizes are checked at Bind
		}
		return
	}
	if err := codecs.DecodeRows(w.f, w.dt, w.geom, w.b, int64(r0), int64(n), dst[:n*k]); err != nil {
		panic("runtime: " + w.name + ": " + err.Error())
	}
}

// decode64 writes rows [r0, r0+n) as float64 into dst (n·K values); tmp is
// float32 scratch of at least n·K values for formats that are not raw bf16.
func (w *matrix) decode64(r0, n int, tmp []float32, dst []float64) {
	k := int(w.geom.K)
	dst = dst[:n*k]
	if w.f == codecs.Raw && w.dt == codecs.BF16 {
		src := w.b[2*r0*k : 2*(r0+n)*k]
		src = src[:2*len(dst)]
		for i := range dst {
			u := uint32(src[2*i]) | uint32(src[2*i+1])<<8
			dst[i] = float64(math.Float32frombits(u << 16))
		}
		return
	}
	tmp = tmp[:n*k]
	w.decode(r0, n, tmp)
	for i, v := range tmp {
		dst[i] = float64(v)
	}
}

// vector decodes a small tensor (norm weights, scales) to float32 once.
func vector(t TensorData) ([]float32, error) {
	w, err := newMatrix(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, w.geom.Elements())
	w.decode(0, w.rows(), out)
	return out, nil
}
