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
	Raw           Format = 1 // kind raw: source bytes verbatim
	Q8            Format = 2 // kind q8_row: per row a bf16 scale and int8 codes
	Q4            Format = 3 // kind q4_block: 20-byte blocks of 32 (bf16 delta, bf16 min, 4-bit codes)
	Q5            Format = 4 // kind q5_block (dgq only): 24-byte blocks of 32, 5-bit codes
	Q6            Format = 5 // kind q6_block: 28-byte blocks of 32, 6-bit codes
	NVFP4         Format = 6 // kind nvfp4_block: per matrix an f32 scale, per row E2M1 codes then E4M3 block scales
)

var formatNames = [...]string{FormatInvalid: "invalid", Raw: "raw", Q8: "q8", Q4: "q4", Q5: "q5", Q6: "q6", NVFP4: "nvfp4"}

// kindNames are the manifest spellings (the engine's "kind").
var kindNames = [...]string{FormatInvalid: "invalid", Raw: "raw", Q8: "q8_row", Q4: "q4_block", Q5: "q5_block", Q6: "q6_block", NVFP4: "nvfp4_block"}

// Kind is the manifest spelling of f ("q4_block", ...).
func (f Format) Kind() string {
	if f.Valid() {
		return kindNames[f]
	}
	return f.String()
}

// ParseKind parses a manifest kind string.
func ParseKind(s string) (Format, error) {
	for _, f := range Formats() {
		if kindNames[f] == s {
			return f, nil
		}
	}
	return FormatInvalid, fmt.Errorf("%w: kind %q (known: raw, q8_row, q4_block, q5_block, q6_block, nvfp4_block)", ErrUnknownFormat, s)
}

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

// MarshalText implements encoding.TextMarshaler with the short name ("q4").
func (f Format) MarshalText() ([]byte, error) {
	if !f.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	return []byte(f.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (short name).
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
// A 3-D expert stack [E, N, K] is E·N rows made of Mats = E matrices; a
// 2-D tensor is one matrix; a rank-0 or rank-1 tensor is one row. Only
// nvfp4 stores something per matrix. Mats ≤ 0 is read as 1.
type Matrix struct {
	Rows, K int64
	Mats    int64
}

// Elements is Rows·K (callers obtain a Matrix from FlattenShape, which
// guarantees it does not overflow).
func (m Matrix) Elements() int64 { return m.Rows * m.K }

// Matrices is the number of matrices (at least 1).
func (m Matrix) Matrices() int64 { return max(m.Mats, 1) }

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
	m := Matrix{Rows: rows, K: k, Mats: 1}
	for _, d := range shape[:max(len(shape)-2, 0)] {
		m.Mats *= d // ≤ rows: cannot overflow
	}
	return m, nil
}

// CheckDims reports whether a tensor of this shape can be stored in f:
// the block formats (q4/q5/q6, nvfp4) need rank ≥ 2 and K a multiple of
// their group (32, 16); q8 needs rank ≥ 2 (the engine itself writes rank 2
// only, see layout's engine table). Raw accepts every shape.
func (f Format) CheckDims(shape []int64) error {
	if !f.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	m, err := FlattenShape(shape)
	if err != nil {
		return err
	}
	if f == Raw {
		return nil
	}
	if len(shape) < 2 {
		return fmt.Errorf("%w: %s needs rank >= 2, shape %v has rank %d", ErrDims, f.Kind(), shape, len(shape))
	}
	if m.Rows == 0 || m.K == 0 {
		return fmt.Errorf("%w: %s cannot store an empty tensor, shape %v", ErrDims, f.Kind(), shape)
	}
	if g := int64(f.GroupSize()); f != Q8 && m.K%g != 0 {
		return fmt.Errorf("%w: %s needs the last dimension to be a multiple of %d, shape %v", ErrDims, f.Kind(), g, shape)
	}
	return nil
}

// Block geometry of the formats (docs/format.md §5).
const (
	affineGroup      = 32 // elements per q4/q5/q6 block
	affineParamBytes = 4  // bf16 delta + bf16 min at the start of a block
	nvfp4Group       = 16 // elements per E4M3 block scale
	nvfp4HeaderBytes = 4  // the f32 scale at the start of every nvfp4 matrix
	q8ScaleBytes     = 2  // the bf16 scale at the start of every q8 row
)

// blockBytes is the size of one q4/q5/q6 block: the two bf16 parameters and
// 32 codes of Bits() bits.
func (f Format) blockBytes() int64 { return affineParamBytes + int64(4*f.Bits()) }

// RowBytes is the size of one encoded row of K elements of dtype dt.
func (f Format) RowBytes(dt DType, k int64) (int64, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("%w: %d", ErrUnknownDType, uint8(dt))
	}
	if k < 0 {
		return 0, fmt.Errorf("%w: negative K %d", ErrShape, k)
	}
	switch f {
	case Raw:
		return mulCheck(k, int64(dt.Size()))
	case Q8:
		return addCheck(k, q8ScaleBytes)
	case Q4, Q5, Q6:
		if k%affineGroup != 0 {
			return 0, fmt.Errorf("%w: %s needs K %% 32 == 0, K = %d", ErrDims, f.Kind(), k)
		}
		return mulCheck(k/affineGroup, f.blockBytes())
	case NVFP4:
		if k%nvfp4Group != 0 {
			return 0, fmt.Errorf("%w: %s needs K %% 16 == 0, K = %d", ErrDims, f.Kind(), k)
		}
		return k/2 + k/nvfp4Group, nil
	}
	return 0, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
}

// HeaderBytes is the size of what is stored once per matrix before its
// rows: nvfp4's f32 matrix scale (4), nothing for the other formats.
func (f Format) HeaderBytes() int64 {
	if f == NVFP4 {
		return nvfp4HeaderBytes
	}
	return 0
}

// Layout is the byte geometry of one encoded tensor: Matrices matrices,
// each HeaderBytes then MatRows rows of RowBytes.
type Layout struct {
	RowBytes, HeaderBytes, MatRows, Matrices int64
}

// Layout returns the geometry of a tensor of dtype dt and matrix m in f.
func (f Format) Layout(dt DType, m Matrix) (Layout, error) {
	if m.Rows < 0 || m.K < 0 {
		return Layout{}, fmt.Errorf("%w: negative geometry %dx%d", ErrShape, m.Rows, m.K)
	}
	rb, err := f.RowBytes(dt, m.K)
	if err != nil {
		return Layout{}, err
	}
	l := Layout{RowBytes: rb, MatRows: m.Rows, Matrices: 1}
	if f == NVFP4 {
		l.HeaderBytes, l.Matrices = nvfp4HeaderBytes, m.Matrices()
		if m.Rows%l.Matrices != 0 {
			return Layout{}, fmt.Errorf("%w: %d rows are not %d whole matrices", ErrShape, m.Rows, l.Matrices)
		}
		l.MatRows = m.Rows / l.Matrices
	}
	if _, err := l.size(); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// size is the encoded size (overflow-checked).
func (l Layout) size() (int64, error) {
	body, err := mulCheck(l.MatRows, l.RowBytes)
	if err != nil {
		return 0, err
	}
	if body, err = addCheck(body, l.HeaderBytes); err != nil {
		return 0, err
	}
	return mulCheck(body, l.Matrices)
}

// Size is the encoded size of the whole tensor.
func (l Layout) Size() int64 { s, _ := l.size(); return s }

// RowOffset is where row r's bytes start.
func (l Layout) RowOffset(r int64) int64 {
	if l.MatRows == 0 {
		return 0
	}
	mat := l.HeaderBytes + l.MatRows*l.RowBytes
	return r/l.MatRows*mat + l.HeaderBytes + r%l.MatRows*l.RowBytes
}

// Span is the byte range [start, end) that rows [r0, r0+n) occupy,
// including the header of every matrix that starts at one of those rows, so
// consecutive row ranges have consecutive spans that tile the tensor.
func (l Layout) Span(r0, n int64) (start, end int64) {
	start = l.RowOffset(r0)
	if l.MatRows > 0 && r0%l.MatRows == 0 {
		start -= l.HeaderBytes
	}
	if n == 0 {
		return start, start
	}
	return start, l.RowOffset(r0+n-1) + l.RowBytes
}

// EncodedSize is the number of bytes a tensor occupies in format f.
func (f Format) EncodedSize(dt DType, m Matrix) (int64, error) {
	l, err := f.Layout(dt, m)
	if err != nil {
		return 0, err
	}
	return l.Size(), nil
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
