package codecs

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Encoder encodes one tensor of a given format, dtype and geometry. After
// setup (NewEncoder, and SetAmax where NeedsScan) it is read-only, so
// EncodeRows and ScanRows may run concurrently on disjoint rows.
type Encoder struct {
	f      Format
	dt     DType
	m      Matrix
	planes []Plane

	aff     affineParams // q4/q5/q6
	amax    float32      // nvfp4: tensor amax (SetAmax)
	amaxSet bool
	scale2  float32 // nvfp4: global scale derived from amax
}

// NewEncoder prepares an encoder for a tensor of geometry m and dtype dt in
// format f.
func NewEncoder(f Format, dt DType, m Matrix) (*Encoder, error) {
	if !f.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(f))
	}
	planes, err := f.Planes(dt, m)
	if err != nil {
		return nil, err
	}
	e := &Encoder{f: f, dt: dt, m: m, planes: planes}
	if f == Q4 || f == Q5 || f == Q6 {
		e.aff = newAffineParams(f.Bits())
	}
	return e, nil
}

// Planes returns the planes of the encoded tensor (a copy).
func (e *Encoder) Planes() []Plane { return append([]Plane(nil), e.planes...) }

// NeedsScan reports whether a whole-tensor statistic (nvfp4's amax) must be
// fixed with SetAmax before EncodeRows.
func (e *Encoder) NeedsScan() bool { return e.f == NVFP4 }

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

// SetAmax fixes the tensor's max|x| (the max over all ScanRows results).
// Non-finite or negative values are treated as 0.
func (e *Encoder) SetAmax(amax float32) {
	if !(amax >= 0) || amax > math.MaxFloat32 {
		amax = 0
	}
	e.amax = amax
	e.amaxSet = true
	e.scale2 = nvfp4Scale2(amax)
}

// TensorPlane returns the bytes of tensor plane i (a plane with RowBytes ==
// 0: nvfp4's global scale, valid after SetAmax), or nil for a row plane or an
// index out of range.
func (e *Encoder) TensorPlane(i int) []byte {
	if i < 0 || i >= len(e.planes) || e.planes[i].RowBytes != 0 {
		return nil
	}
	if e.f == NVFP4 {
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(e.scale2))
	}
	return make([]byte, e.planes[i].Size)
}

// EncodeRows encodes rows [r0, r0+n). src holds exactly those rows' source
// bytes; dst[i] receives exactly n·Planes()[i].RowBytes bytes for every row
// plane i (entries for tensor planes are ignored). It returns the error of
// the decoded result against the source, identical to what DecodeRows gives.
func (e *Encoder) EncodeRows(dst [][]byte, src []byte, r0, n int64) (Stats, error) {
	if err := e.checkRows(dst, src, r0, n); err != nil {
		return Stats{}, err
	}
	if e.NeedsScan() && !e.amaxSet {
		return Stats{}, fmt.Errorf("%w: %s rows %d..%d", ErrNeedScan, e.f, r0, r0+n)
	}
	switch e.f {
	case Raw:
		return encodeRaw(e, dst[0], src, r0, n)
	case Q8:
		return encodeQ8(e, dst[0], dst[1], src, r0, n)
	case Q4, Q5, Q6:
		return encodeAffine(e, dst[0], dst[1], dst[2], src, r0, n)
	case NVFP4:
		return encodeNVFP4(e, dst[0], dst[1], src, r0, n)
	}
	return Stats{}, fmt.Errorf("%w: %d", ErrUnknownFormat, uint8(e.f))
}

func (e *Encoder) checkRows(dst [][]byte, src []byte, r0, n int64) error {
	if r0 < 0 || n < 0 || r0 > e.m.Rows || n > e.m.Rows-r0 {
		return fmt.Errorf("%w: rows %d..%d+%d outside 0..%d", ErrBuffer, r0, r0, n, e.m.Rows)
	}
	if want := n * e.m.K * int64(e.dt.Size()); int64(len(src)) != want {
		return fmt.Errorf("%w: source has %d bytes, %d rows need %d", ErrBuffer, len(src), n, want)
	}
	if len(dst) != len(e.planes) {
		return fmt.Errorf("%w: %d destination planes, %s has %d", ErrBuffer, len(dst), e.f, len(e.planes))
	}
	for i, p := range e.planes {
		if p.RowBytes == 0 {
			continue
		}
		if want := n * p.RowBytes; int64(len(dst[i])) != want {
			return fmt.Errorf("%w: plane %s has %d bytes, %d rows need %d", ErrBuffer, p.Name, len(dst[i]), n, want)
		}
	}
	return nil
}

// encodeRaw copies the source bytes after checking them.
func encodeRaw(e *Encoder, dst, src []byte, r0, n int64) (Stats, error) {
	if i := firstNonFinite(e.dt, src); i >= 0 {
		return Stats{}, nonFiniteAt(r0, e.m.K, int64(i))
	}
	copy(dst, src)
	var buf [256]float32
	var ref float64
	cnt := len(src) / e.dt.Size()
	for i := 0; i < cnt; i += len(buf) {
		c := min(len(buf), cnt-i)
		toFloat32(e.dt, src[i*e.dt.Size():], buf[:c])
		for _, v := range buf[:c] {
			ref += float64(v) * float64(v)
		}
	}
	return Stats{SumSqRef: ref, N: int64(cnt)}, nil
}

// EncodeTensor encodes a whole tensor held in memory (src: Rows·K source
// elements) into one freshly allocated buffer of EncodedSize bytes: the scan
// pass when the format needs one, every row plane, and the tensor planes.
// Streaming writers use Encoder directly; this is for tests, benchmarks and
// tools that have the whole tensor at hand.
func EncodeTensor(f Format, dt DType, m Matrix, src []byte) ([]byte, Stats, error) {
	e, err := NewEncoder(f, dt, m)
	if err != nil {
		return nil, Stats{}, err
	}
	if e.NeedsScan() {
		amax, err := e.ScanRows(src)
		if err != nil {
			return nil, Stats{}, err
		}
		e.SetAmax(amax)
	}
	size, err := f.EncodedSize(dt, m)
	if err != nil {
		return nil, Stats{}, err
	}
	out := make([]byte, size)
	planes := e.Planes()
	dst := make([][]byte, len(planes))
	for i, p := range planes {
		dst[i] = out[p.Offset : p.Offset+p.Size]
		if p.RowBytes == 0 {
			copy(dst[i], e.TensorPlane(i))
		}
	}
	st, err := e.EncodeRows(dst, src, 0, m.Rows)
	if err != nil {
		return nil, Stats{}, err
	}
	return out, st, nil
}
