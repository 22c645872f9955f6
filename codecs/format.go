package codecs

import (
	"fmt"
	"math/bits"
)

// Format is how a tensor's bytes are stored in a pack. The text form ("raw",
// "q8", ...) is what manifests and the command line use.
type Format uint8

const (
	FormatInvalid Format = 0
	Raw           Format = 1 // source bytes verbatim
	Q8            Format = 2 // per-row symmetric int8, f32 row scale
	Q4            Format = 3 // group-32 affine 4-bit, fp16 scale + bias per group
	Q5            Format = 4 // group-32 affine 5-bit
	Q6            Format = 5 // group-32 affine 6-bit
	NVFP4         Format = 6 // E2M1, 16-element blocks, E4M3 block scale, f32 tensor scale
)

var formatNames = [...]string{FormatInvalid: "invalid", Raw: "raw", Q8: "q8", Q4: "q4", Q5: "q5", Q6: "q6", NVFP4: "nvfp4"}

// Formats lists every valid format in numeric order.
func Formats() []Format { return []Format{Raw, Q8, Q4, Q5, Q6, NVFP4} }

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Valid reports whether f is a known format.
func (f Format) Valid() bool { return f >= Raw && f <= NVFP4 }

// ParseFormat parses the text form of a format.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if formatNames[f] == s {
			return f, nil
		}
	}
	return FormatInvalid, fmt.Errorf("%w: %q (known: raw, q8, q4, q5, q6, nvfp4)", ErrUnknownFormat, s)
}

// MarshalText implements encoding.TextMarshaler.
func (f Format) MarshalText() ([]byte, error) {
	if !f.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *Format) UnmarshalText(b []byte) error {
	v, err := ParseFormat(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// GroupSize is the number of consecutive elements along K that share one
// scale: 32 for q4/q5/q6, 16 for nvfp4, K (the whole row) for q8, 1 for raw.
func (f Format) GroupSize() int {
	switch f {
	case Q4, Q5, Q6:
		return 32
	case NVFP4:
		return 16
	}
	return 1
}

// Bits is the width of one stored code (0 for raw, whose width is the dtype's).
func (f Format) Bits() int {
	switch f {
	case Q8:
		return 8
	case Q4, NVFP4:
		return 4
	case Q5:
		return 5
	case Q6:
		return 6
	}
	return 0
}

// Quantized reports whether the format transforms the source (every format but raw).
func (f Format) Quantized() bool { return f.Valid() && f != Raw }

// MaxRank bounds the number of dimensions of any tensor dgq accepts.
const MaxRank = 8

// Matrix is a tensor seen as a row-major matrix: K is the last dimension
// (the reduction axis of the linear layer), Rows the product of the others.
// A 3-D expert stack [E, N, K] is E·N rows. A rank-0 tensor is 1×1.
type Matrix struct {
	Rows, K int64
}

// Elements is Rows·K (callers obtain a Matrix from FlattenShape, which
// guarantees it does not overflow).
func (m Matrix) Elements() int64 { return m.Rows * m.K }

// FlattenShape turns a shape into a Matrix, refusing negative dimensions,
// more than MaxRank dimensions and element counts that overflow int64.
func FlattenShape(shape []int64) (Matrix, error) {
	if len(shape) > MaxRank {
		return Matrix{}, fmt.Errorf("%w: rank %d exceeds %d", ErrShape, len(shape), MaxRank)
	}
	rows, k := int64(1), int64(1)
	for i, d := range shape {
		if d < 0 {
			return Matrix{}, fmt.Errorf("%w: negative dimension %d", ErrShape, d)
		}
		if i == len(shape)-1 {
			k = d
			break
		}
		var err error
		if rows, err = mulCheck(rows, d); err != nil {
			return Matrix{}, err
		}
	}
	if _, err := mulCheck(rows, k); err != nil {
		return Matrix{}, err
	}
	return Matrix{Rows: rows, K: k}, nil
}

// CheckDims reports whether a tensor of this shape can be stored in f:
// q4/q5/q6 need K % 32 == 0, nvfp4 K % 16 == 0, q8 rank ≥ 2 (per-row scales
// of a 3-D stack are per row of each expert). Raw accepts every shape.
func (f Format) CheckDims(shape []int64) error {
	if !f.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	m, err := FlattenShape(shape)
	if err != nil {
		return err
	}
	switch f {
	case Q8:
		if len(shape) < 2 {
			return fmt.Errorf("%w: q8 needs rank >= 2, shape %v has rank %d", ErrDims, shape, len(shape))
		}
	case Q4, Q5, Q6, NVFP4:
		if len(shape) < 1 || m.K%int64(f.GroupSize()) != 0 {
			return fmt.Errorf("%w: %s needs the last dimension to be a multiple of %d, shape %v", ErrDims, f, f.GroupSize(), shape)
		}
	}
	return nil
}

// Plane is one contiguous region of an encoded tensor. Row planes hold
// RowBytes bytes for each row, rows in order; a tensor plane (RowBytes == 0)
// holds Size bytes that describe the whole tensor. Every plane starts at a
// multiple of PlaneAlign from the start of the tensor.
type Plane struct {
	Name     string
	Offset   int64
	Size     int64
	RowBytes int64
}

// PlaneAlign is the alignment of every plane inside an encoded tensor.
const PlaneAlign = 64

// Planes returns the planes of a tensor of dtype dt and geometry m stored
// in f, in storage order. See docs/format.md for the byte layout of each.
//
//	raw:   data   [Rows][K]dt                 (source bytes verbatim)
//	q8:    codes  [Rows][K]int8               scales [Rows]f32
//	q4:    codes  [Rows][K/2]byte             scales [Rows][K/32]fp16  biases [Rows][K/32]fp16
//	q5:    codes  [Rows][K*5/8]byte           scales, biases as q4
//	q6:    codes  [Rows][K*6/8]byte           scales, biases as q4
//	nvfp4: codes  [Rows][K/2]byte             scales [Rows][K/16]e4m3  global [1]f32
func (f Format) Planes(dt DType, m Matrix) ([]Plane, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownDType, uint8(dt))
	}
	if m.Rows < 0 || m.K < 0 {
		return nil, fmt.Errorf("%w: negative geometry %dx%d", ErrShape, m.Rows, m.K)
	}
	if g := int64(f.GroupSize()); f.Quantized() && f != Q8 && m.K%g != 0 {
		return nil, fmt.Errorf("%w: %s needs K %% %d == 0, K = %d", ErrDims, f, g, m.K)
	}
	type spec struct {
		name     string
		rowBytes int64
		size     int64 // for tensor planes
	}
	var specs []spec
	switch f {
	case Raw:
		specs = []spec{{"data", m.K * int64(dt.Size()), 0}}
	case Q8:
		specs = []spec{{"codes", m.K, 0}, {"scales", 4, 0}}
	case Q4, Q5, Q6:
		groups := m.K / 32
		specs = []spec{{"codes", m.K * int64(f.Bits()) / 8, 0}, {"scales", groups * 2, 0}, {"biases", groups * 2, 0}}
	case NVFP4:
		specs = []spec{{"codes", m.K / 2, 0}, {"scales", m.K / 16, 0}, {"global", 0, 4}}
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	planes := make([]Plane, len(specs))
	var off int64
	for i, s := range specs {
		size := s.size
		if s.rowBytes != 0 || s.size == 0 {
			var err error
			if size, err = mulCheck(m.Rows, s.rowBytes); err != nil {
				return nil, err
			}
		}
		if i > 0 {
			var err error
			if off, err = AlignUp(off, PlaneAlign); err != nil {
				return nil, err
			}
		}
		planes[i] = Plane{Name: s.name, Offset: off, Size: size, RowBytes: s.rowBytes}
		var err error
		if off, err = addCheck(off, size); err != nil {
			return nil, err
		}
	}
	return planes, nil
}

// EncodedSize is the number of bytes a tensor occupies in format f: the end
// of its last plane.
func (f Format) EncodedSize(dt DType, m Matrix) (int64, error) {
	planes, err := f.Planes(dt, m)
	if err != nil {
		return 0, err
	}
	last := planes[len(planes)-1]
	return last.Offset + last.Size, nil
}

// AlignUp rounds v up to a multiple of a (a power of two), refusing overflow.
func AlignUp(v, a int64) (int64, error) {
	if a <= 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("codecs: alignment %d is not a power of two", a)
	}
	if v < 0 || v > (1<<63-1)-(a-1) {
		return 0, fmt.Errorf("%w: %d aligned to %d overflows", ErrShape, v, a)
	}
	return (v + a - 1) &^ (a - 1), nil
}

func mulCheck(a, b int64) (int64, error) {
	if a < 0 || b < 0 {
		return 0, fmt.Errorf("%w: negative size", ErrShape)
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > 1<<63-1 {
		return 0, fmt.Errorf("%w: %d x %d overflows", ErrShape, a, b)
	}
	return int64(lo), nil
}

func addCheck(a, b int64) (int64, error) {
	s := a + b
	if a < 0 || b < 0 || s < a {
		return 0, fmt.Errorf("%w: %d + %d overflows", ErrShape, a, b)
	}
	return s, nil
}
