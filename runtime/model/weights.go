package model

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// Weights is a loaded pack as the runtime sees it.
type Weights interface {
	// Tensors lists every stored tensor.
	Tensors() []backend.TensorData
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
		w.tensors = append(w.tensors, backend.TensorData{Name: t.Name, Format: t.Format, DType: t.DType,
			Shape: slices.Clone(t.Shape), Bytes: b})
	}
	return w
}

type packWeights struct {
	p       *dgq.Pack
	tensors []backend.TensorData
}

func (w *packWeights) Tensors() []backend.TensorData { return w.tensors }

// ReadFile reads a side file the manifest lists, from the pack directory.
func (w *packWeights) ReadFile(name string) ([]byte, error) {
	listed := w.p.Manifest.DGQ == nil && slices.Contains(dgq.EngineSideFiles, name) // the engine lists none
	for _, f := range w.p.Manifest.SideFiles() {
		listed = listed || f.Name == name
	}
	if !listed || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("model: pack %s has no side file %q: %w", w.p.Dir, name, fs.ErrNotExist)
	}
	b, err := os.ReadFile(filepath.Join(w.p.Dir, name))
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return b, nil
}

// vector decodes a small tensor (norm weights, scales) to float32 once.
func vector(t backend.TensorData) ([]float32, error) {
	g, err := t.Matrix()
	if err != nil {
		return nil, err
	}
	out := make([]float32, g.Elements())
	if t.Format == codecs.Raw {
		err = codecs.ToFloat32(t.DType, t.Bytes, out)
	} else {
		err = codecs.DecodeRows(t.Format, t.DType, g, t.Bytes, 0, g.Rows, out)
	}
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", t.Name, err)
	}
	return out, nil
}
