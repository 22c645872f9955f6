package codecs

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Method is how an encoder chooses the stored parameters. Both write the
// same format; they differ only in which bytes they pick.
type Method uint8

const (
	// Search minimizes the squared error of the decoded values, scoring
	// every candidate after its parameters are rounded to what is stored.
	Search Method = iota
	// MinMax reproduces the original engine's encoders bit for bit: min/max
	// parameters, codes from the unrounded float32 parameters, parameters
	// stored truncated to bf16, nvfp4 matrix scale 1.0.
	MinMax
)

var methodNames = [...]string{Search: "search", MinMax: "minmax"}

func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return fmt.Sprintf("Method(%d)", uint8(m))
}

// ParseMethod parses "search" or "minmax".
func ParseMethod(s string) (Method, error) {
	for i, n := range methodNames {
		if n == s {
			return Method(i), nil
		}
	}
	return 0, fmt.Errorf("%w: encoder %q (known: search, minmax)", ErrUnknownMethod, s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Method) MarshalText() ([]byte, error) {
	if int(m) >= len(methodNames) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownMethod, uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Method) UnmarshalText(b []byte) error {
	v, err := ParseMethod(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Encoder encodes one tensor of a given format, dtype and geometry. After
// setup (NewEncoder, and SetAmax for every matrix where NeedsScan) it is
// read-only, so EncodeRows and ScanRows may run concurrently on disjoint rows.
type Encoder struct {
	f      Format
	dt     DType
	m      Matrix
	l      Layout
	method Method

	// nvfp4: the f32 scale of every matrix (1 for MinMax; set by SetAmax for Search)
	matScale []float32
	matSet   []bool

	// imp: the importance weights (SetImportance), Matrices()·K values; nil
	// for the unweighted search
	imp []float64
}

// NewEncoder prepares an encoder for a tensor of geometry m and dtype dt in
// format f with the given method.
func NewEncoder(f Format, dt DType, m Matrix, method Method) (*Encoder, error) {
	if !f.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	if int(method) >= len(methodNames) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownMethod, uint8(method))
	}
	l, err := f.Layout(dt, m)
	if err != nil {
		return nil, err
	}
	e := &Encoder{f: f, dt: dt, m: m, l: l, method: method}
	if f == NVFP4 {
		e.matScale = make([]float32, l.Matrices)
		e.matSet = make([]bool, l.Matrices)
		if method == MinMax {
			for i := range e.matScale {
				e.matScale[i], e.matSet[i] = 1, true
			}
		}
	}
	return e, nil
}

// Layout returns the byte geometry of the encoded tensor.
func (e *Encoder) Layout() Layout { return e.l }

// NeedsScan reports whether each matrix's max|x| must be fixed with SetAmax
// before its rows are encoded (the searching nvfp4 encoder's matrix scale).
func (e *Encoder) NeedsScan() bool { return e.f == NVFP4 && e.method == Search }

// ScanRows returns max|x| over src, which holds whole rows of source bytes.
// A NaN or infinity gives an error wrapping ErrNonFinite. It does not modify e.
func (e *Encoder) ScanRows(src []byte) (float32, error) {
	rowBytes := e.m.K * int64(e.dt.Size())
	if rowBytes == 0 {
		if len(src) != 0 {
			return 0, fmt.Errorf("%w: %d bytes for rows of 0 bytes", ErrBuffer, len(src))
		}
		return 0, nil
	}
	if int64(len(src))%rowBytes != 0 {
		return 0, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte rows", ErrBuffer, len(src), rowBytes)
	}
	if i := firstNonFinite(e.dt, src); i >= 0 {
		return 0, nonFiniteAt(0, e.m.K, int64(i))
	}
	return absMax(e.dt, src), nil
}

// absMax is max|x| over finite source bytes.
func absMax(dt DType, src []byte) float32 { return absBitsToFloat32(dt, absMaxBits(dt, src)) }

// SetAmax fixes max|x| of matrix mat (the max over the ScanRows results of
// its rows), which sets the matrix's stored scale. Non-finite or negative
// values are treated as 0. It is ignored by encoders that need no scan.
func (e *Encoder) SetAmax(mat int64, amax float32) {
	if !e.NeedsScan() || mat < 0 || mat >= int64(len(e.matScale)) {
		return
	}
	if !(amax >= 0) || amax > math.MaxFloat32 {
		amax = 0
	}
	e.matScale[mat] = nvfp4Scale2(amax)
	e.matSet[mat] = true
}

// EncodeRows encodes rows [r0, r0+n). src holds exactly those rows' source
// bytes; dst is exactly their span (Layout().Span(r0, n): the rows and the
// header of every matrix starting among them). It returns the error of the
// decoded result against the source, identical to what DecodeRows gives.
func (e *Encoder) EncodeRows(dst, src []byte, r0, n int64) (Stats, error) {
	if err := e.checkRows(dst, src, r0, n); err != nil {
		return Stats{}, err
	}
	if i := firstNonFinite(e.dt, src); i >= 0 {
		return Stats{}, nonFiniteAt(r0, e.m.K, int64(i))
	}
	if e.f == NVFP4 && n > 0 {
		for mat := r0 / e.l.MatRows; mat <= (r0+n-1)/e.l.MatRows; mat++ {
			if !e.matSet[mat] {
				return Stats{}, fmt.Errorf("%w: %s matrix %d", ErrNeedScan, e.f.Kind(), mat)
			}
		}
	}
	if e.imp != nil {
		return e.encodeRowsWeighted(dst, src, r0, n)
	}
	start, _ := e.l.Span(r0, n)
	if e.method == Search && (e.f == Q4 || e.f == Q5 || e.f == Q6) {
		// Non-nvfp4 kinds have no headers: the rows are contiguous.
		return searchAffineRows(e.dt, e.f.Bits(), dst, src), nil
	}
	srcRow := e.m.K * int64(e.dt.Size())
	var st Stats
	var x []float32
	var sc scratch
	if e.f != Raw {
		x = make([]float32, e.m.K)
	}
	for r := r0; r < r0+n; r++ {
		if e.f == NVFP4 && r%e.l.MatRows == 0 {
			putNVFP4Header(dst[e.l.RowOffset(r)-start-nvfp4HeaderBytes:], e.matScale[r/e.l.MatRows])
		}
		off := e.l.RowOffset(r) - start
		row := dst[off : off+e.l.RowBytes]
		s := src[(r-r0)*srcRow : (r-r0+1)*srcRow]
		if e.f == Raw {
			encodeRawRow(e.dt, row, s, &st)
			continue
		}
		toFloat32(e.dt, s, x)
		switch e.f {
		case Q8:
			encodeQ8Row(e.method, row, x, &sc, &st)
		case Q4, Q5, Q6:
			if g := encodeAffineRow(e.f.Bits(), row, x, &sc, &st); g >= 0 {
				return Stats{}, fmt.Errorf("%w: row %d, elements %d..%d span more than float32 holds; the engine's min/max encoder would store an infinite step (the group decodes to NaN): use --encoder search", ErrRange, r, g*32, g*32+31)
			}
		case NVFP4:
			encodeNVFP4Row(e.method, e.matScale[r/e.l.MatRows], row, x, &sc, &st)
		}
	}
	return st, nil
}

// putNVFP4Header writes an nvfp4 matrix's header: its float32 scale.
func putNVFP4Header(dst []byte, scale float32) {
	binary.LittleEndian.PutUint32(dst, math.Float32bits(scale))
}

func (e *Encoder) checkRows(dst, src []byte, r0, n int64) error {
	if r0 < 0 || n < 0 || r0 > e.m.Rows || n > e.m.Rows-r0 {
		return fmt.Errorf("%w: rows %d..%d+%d outside 0..%d", ErrBuffer, r0, r0, n, e.m.Rows)
	}
	if want := n * e.m.K * int64(e.dt.Size()); int64(len(src)) != want {
		return fmt.Errorf("%w: source has %d bytes, %d rows need %d", ErrBuffer, len(src), n, want)
	}
	start, end := e.l.Span(r0, n)
	if int64(len(dst)) != end-start {
		return fmt.Errorf("%w: destination has %d bytes, rows %d..%d need %d", ErrBuffer, len(dst), r0, r0+n, end-start)
	}
	return nil
}

// encodeRawRow copies one row of (finite) source bytes.
func encodeRawRow(dt DType, dst, src []byte, st *Stats) {
	copy(dst, src)
	var buf [256]float32
	cnt := len(src) / dt.Size()
	var ref float64
	for i := 0; i < cnt; i += len(buf) {
		c := min(len(buf), cnt-i)
		toFloat32(dt, src[i*dt.Size():], buf[:c])
		for _, v := range buf[:c] {
			ref += float64(float64(v) * float64(v))
		}
	}
	st.SumSqRef += ref
	st.N += int64(cnt)
}

// EncodeTensor encodes a whole tensor held in memory (src: Rows·K source
// elements) into one freshly allocated buffer of EncodedSize bytes: the scan
// when the method needs one, then every row. Streaming writers use Encoder
// directly; this is for tests, benchmarks and tools that have the whole
// tensor at hand.
func EncodeTensor(f Format, dt DType, m Matrix, method Method, src []byte) ([]byte, Stats, error) {
	e, err := NewEncoder(f, dt, m, method)
	if err != nil {
		return nil, Stats{}, err
	}
	if want := m.Elements() * int64(dt.Size()); int64(len(src)) != want {
		return nil, Stats{}, fmt.Errorf("%w: source has %d bytes, want %d", ErrBuffer, len(src), want)
	}
	if e.NeedsScan() {
		per := int64(len(src)) / e.l.Matrices
		for mat := range e.l.Matrices {
			amax, err := e.ScanRows(src[mat*per : (mat+1)*per])
			if err != nil {
				return nil, Stats{}, err
			}
			e.SetAmax(mat, amax)
		}
	}
	out := make([]byte, e.l.Size())
	st, err := e.EncodeRows(out, src, 0, m.Rows)
	if err != nil {
		return nil, Stats{}, err
	}
	return out, st, nil
}

// scratch holds one EncodeRows call's per-row buffers, reused row after row.
type scratch struct {
	u8  []uint8
	i8  []int8
	f32 []float32
}

func (s *scratch) codes(n int) []uint8 {
	if cap(s.u8) < n {
		s.u8 = make([]uint8, n)
	}
	return s.u8[:n]
}

func (s *scratch) int8s(n int) []int8 {
	if cap(s.i8) < n {
		s.i8 = make([]int8, n)
	}
	return s.i8[:n]
}

func (s *scratch) floats(n int) []float32 {
	if cap(s.f32) < n {
		s.f32 = make([]float32, n)
	}
	return s.f32[:n]
}
