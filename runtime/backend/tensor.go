package backend

import (
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
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

// Matrix checks that t's bytes decode as its format, dtype and shape say and
// returns its geometry as a [Rows, K] matrix (leading dimensions flattened
// into Rows).
func (t TensorData) Matrix() (codecs.Matrix, error) {
	g, err := t.matrix()
	if err != nil {
		return codecs.Matrix{}, fmt.Errorf("backend: tensor %q: %w", t.Name, err)
	}
	return g, nil
}

func (t TensorData) matrix() (codecs.Matrix, error) {
	if !t.Format.Valid() {
		return codecs.Matrix{}, fmt.Errorf("unknown format %d", uint8(t.Format))
	}
	if !t.DType.Valid() {
		return codecs.Matrix{}, fmt.Errorf("unknown dtype %d", uint8(t.DType))
	}
	if err := t.Format.CheckDims(t.Shape); err != nil {
		return codecs.Matrix{}, err
	}
	g, err := codecs.FlattenShape(t.Shape)
	if err != nil {
		return codecs.Matrix{}, err
	}
	size, err := t.Format.EncodedSize(t.DType, g)
	if err != nil {
		return codecs.Matrix{}, err
	}
	if int64(len(t.Bytes)) != size {
		return codecs.Matrix{}, fmt.Errorf("%s %s %v holds %d bytes, want %d", t.Format, t.DType, t.Shape, len(t.Bytes), size)
	}
	return g, nil
}
