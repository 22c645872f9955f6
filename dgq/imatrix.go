package dgq

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/layout"
)

// An importance matrix (docs/format.md, "The imatrix file"; written by dgq
// calibrate) gives, per quantized tensor, the sum of squared inputs of every
// input column and how many rows reached it. quantize --imatrix turns it into
// the encoder's column weights (codecs.Encoder.SetImportance), matrix by
// matrix (one per expert of a 3-D bank):
//
//	v_k = in_sum2[k] / counts        (the column's mean square input)
//	w_k = max(v_k / mean_k(v), 2⁻¹⁰)  (relative to the matrix's mean column)
//
// Only the ratios between a group's weights change the search's choice, so
// normalizing by the mean changes nothing but the floor's meaning: a column
// the calibration text saw as (nearly) silent still counts 1/1024 of an
// average column, so its values stay bounded by the fit rather than left to
// chance on text the calibration did not cover. A matrix no calibration row
// reached (counts 0: an expert never routed to, or a tensor text never runs,
// like the vision tower's) is encoded with uniform weights, i.e. exactly as
// without an imatrix, and counted in the report.

// ErrImatrix: an --imatrix file that is not an importance matrix for the
// source being quantized (unreadable, malformed, another model's, a tensor
// missing or of another shape).
var ErrImatrix = errclass.New(errclass.Invalid, "dgq: unusable imatrix")

// imatrixFloor is the smallest weight relative to a matrix's mean column.
const imatrixFloor = 1.0 / 1024

// maxImatrixBytes bounds the file read into memory (the real model's is
// about 0.1 GB).
const maxImatrixBytes = 4 << 30

// Imatrix is a parsed importance-matrix file.
type Imatrix struct {
	Path   string
	SHA256 string            // hex SHA-256 of the whole file
	Meta   map[string]string // its __metadata__
	stats  map[string]imStat // by tensor name
}

// imStat is one tensor's statistics: experts rows of in values.
type imStat struct {
	sum2, counts []float32
	experts, in  int64
}

// ImatrixRef is what a pack's manifest records of the imatrix it was
// quantized with (the dgq object's "imatrix").
type ImatrixRef struct {
	SHA256     string `json:"sha256"`
	TextSHA256 string `json:"text_sha256,omitempty"` // the calibration text's, from the file's metadata
}

// ReadImatrix reads and checks an importance-matrix file: a safetensors file
// whose tensors come in pairs NAME.in_sum2 (F32 [in] or [experts, in]) and
// NAME.counts (F32 [1] or [experts]) of finite values ≥ 0.
func ReadImatrix(path string) (*Imatrix, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s does not exist (make one with dgq calibrate SOURCE --text FILE -o %s)", ErrImatrix, path, path)
	case err != nil:
		return nil, fmt.Errorf("dgq: imatrix: %w", err)
	case fi.IsDir():
		return nil, fmt.Errorf("%w: %s is a folder, not an imatrix file", ErrImatrix, path)
	case fi.Size() > maxImatrixBytes:
		return nil, fmt.Errorf("%w: %s is %d bytes, more than an imatrix holds (%d)", ErrImatrix, path, fi.Size(), int64(maxImatrixBytes))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dgq: imatrix: %w", err)
	}
	return parseImatrix(path, data)
}

func parseImatrix(path string, data []byte) (*Imatrix, error) {
	h, err := hfcache.ParseHeader(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a safetensors file: %w", ErrImatrix, path, err)
	}
	sum := sha256.Sum256(data)
	im := &Imatrix{Path: path, SHA256: hex.EncodeToString(sum[:]), Meta: h.Metadata, stats: map[string]imStat{}}
	vals := map[string][]float32{}
	shapes := map[string][]int64{}
	for _, t := range h.Tensors {
		if t.DType != codecs.F32 {
			return nil, fmt.Errorf("%w: %s: tensor %s is %s, the format stores F32", ErrImatrix, path, t.Name, t.DType)
		}
		v := make([]float32, t.Size/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[t.Offset+int64(4*i):]))
			if !(v[i] >= 0) || v[i] > math.MaxFloat32 {
				return nil, fmt.Errorf("%w: %s: tensor %s holds %v at %d, not a finite number ≥ 0", ErrImatrix, path, t.Name, v[i], i)
			}
		}
		vals[t.Name], shapes[t.Name] = v, t.Shape
	}
	for name, shape := range shapes {
		base, ok := strings.CutSuffix(name, ".in_sum2")
		if !ok {
			if _, ok := strings.CutSuffix(name, ".counts"); !ok {
				return nil, fmt.Errorf("%w: %s: tensor %s is neither NAME.in_sum2 nor NAME.counts", ErrImatrix, path, name)
			}
			if _, ok := shapes[strings.TrimSuffix(name, ".counts")+".in_sum2"]; !ok {
				return nil, fmt.Errorf("%w: %s: %s has no matching .in_sum2", ErrImatrix, path, name)
			}
			continue
		}
		cshape, ok := shapes[base+".counts"]
		if !ok {
			return nil, fmt.Errorf("%w: %s: %s has no matching %s.counts", ErrImatrix, path, name, base)
		}
		var s imStat
		switch {
		case len(shape) == 1 && slices.Equal(cshape, []int64{1}):
			s = imStat{experts: 1, in: shape[0]}
		case len(shape) == 2 && slices.Equal(cshape, []int64{shape[0]}):
			s = imStat{experts: shape[0], in: shape[1]}
		default:
			return nil, fmt.Errorf("%w: %s: %s has shape %v and its counts %v (want [in] with [1], or [experts, in] with [experts])", ErrImatrix, path, base, shape, cshape)
		}
		s.sum2, s.counts = vals[name], vals[base+".counts"]
		im.stats[base] = s
	}
	if len(im.stats) == 0 {
		return nil, fmt.Errorf("%w: %s holds no statistics", ErrImatrix, path)
	}
	return im, nil
}

// Ref is what the manifest records of im.
func (im *Imatrix) Ref() *ImatrixRef {
	return &ImatrixRef{SHA256: im.SHA256, TextSHA256: im.Meta["text_sha256"]}
}

// check refuses an imatrix that lacks a quantized tensor of the plan or
// holds it in another shape, before anything is written.
func (im *Imatrix) check(plan *layout.Plan) error {
	var missing []string
	for _, e := range plan.Entries {
		if !e.Format.Quantized() {
			continue
		}
		s, ok := im.stats[e.Name]
		if !ok {
			missing = append(missing, e.Name)
			continue
		}
		m, err := codecs.FlattenShape(e.Shape)
		if err != nil {
			return fmt.Errorf("dgq: tensor %s: %w", e.Name, err)
		}
		if s.experts != m.Matrices() || s.in != m.K {
			return fmt.Errorf("%w: %s: %s has statistics for %d matrices of %d columns, the source tensor %v has %d of %d: the imatrix was made from another model", ErrImatrix, im.Path, e.Name, s.experts, s.in, e.Shape, m.Matrices(), m.K)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks statistics for %d of the quantized tensors (%s): it was made from another model; make one from this source with dgq calibrate", ErrImatrix, im.Path, len(missing), abbreviateNames(missing, 3))
	}
	return nil
}

// weights returns tensor name's column weights for m (Matrices()·K values)
// and how many of its matrices no calibration row reached (uniform weights).
func (im *Imatrix) weights(name string, m codecs.Matrix) ([]float32, int) {
	s := im.stats[name]
	w := make([]float32, m.Matrices()*m.K)
	unreached := 0
	for e := range m.Matrices() {
		row, sum := s.sum2[e*m.K:(e+1)*m.K], 0.0
		for _, v := range row {
			sum += float64(v)
		}
		out := w[e*m.K : (e+1)*m.K]
		if s.counts[e] == 0 || sum == 0 || m.K == 0 {
			unreached++
			for k := range out {
				out[k] = 1
			}
			continue
		}
		// v_k / mean(v) = in_sum2[k] / mean(in_sum2): counts cancels
		mean := sum / float64(m.K)
		for k, v := range row {
			out[k] = float32(max(float64(v)/mean, imatrixFloor))
		}
	}
	return w, unreached
}

// abbreviateNames lists the first n names and how many more there are.
func abbreviateNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
