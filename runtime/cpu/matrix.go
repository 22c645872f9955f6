package cpu

import (
	"math"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// matrix is a bound weight: a tensor seen as a row-major [Rows, K] matrix in
// its stored format. Rows are decoded on demand, never the whole matrix.
type matrix struct {
	name string
	f    codecs.Format
	dt   codecs.DType
	geom codecs.Matrix
	b    []byte
}

// newMatrix checks that t's bytes decode as its format, dtype and shape
// say (backend.TensorData.Matrix).
func newMatrix(t backend.TensorData) (*matrix, error) {
	g, err := t.Matrix()
	if err != nil {
		return nil, err
	}
	return &matrix{name: t.Name, f: t.Format, dt: t.DType, geom: g, b: t.Bytes}, nil
}

func (w *matrix) rows() int { return int(w.geom.Rows) }
func (w *matrix) cols() int { return int(w.geom.K) }

// decode writes rows [r0, r0+n) as float32 into dst (n·K values).
func (w *matrix) decode(r0, n int, dst []float32) {
	k := int(w.geom.K)
	if w.f == codecs.Raw {
		rb := k * w.dt.Size()
		if err := codecs.ToFloat32(w.dt, w.b[r0*rb:(r0+n)*rb], dst[:n*k]); err != nil {
			panic("cpu: " + w.name + ": " + err.Error()) // sizes are checked by newMatrix
		}
		return
	}
	if err := codecs.DecodeRows(w.f, w.dt, w.geom, w.b, int64(r0), int64(n), dst[:n*k]); err != nil {
		panic("cpu: " + w.name + ": " + err.Error())
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
