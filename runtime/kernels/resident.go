package kernels

import (
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
)

// The resident layout of stored tensors: what relayout.kern writes at upload
// and the common include's decoders read (docs/cuda.md, "Weights on the
// device"). A pack stores quantized tensors as the engine's interleaved
// blocks; a device keeps each planar, one array (plane) per kind of value:
//
//	raw    data [rows][K·size]                       (the pack's bytes)
//	q8     codes [rows][K] int8, scales [rows] f32    (the bf16 scale widened, exact)
//	q4/5/6 codes [rows][K·bits/8] (each row one LSB-first bit string, the
//	       blocks' code bytes back to back), deltas [rows][K/32] bf16,
//	       mins [rows][K/32] bf16
//	nvfp4  codes [rows][K/2], scales [rows][K/16] E4M3, gscale [matrices] f32
//	       (row r's matrix is r / MatRows: each expert of a stack has its own)
//
// Planes start at multiples of PlaneAlign bytes from the tensor's start.

// PlaneAlign is the alignment of every plane of a resident tensor (CUDA's
// tensor-core kernels load 16-byte pieces of the delta and min planes).
const PlaneAlign = 64

// Format codes of the common include's dgq_decode (DGQ_FMT_* in common.h).
const (
	FmtF32 uint32 = iota
	FmtBF16
	FmtF16
	FmtQ8
	FmtAffine
	FmtNVFP4
)

// Resident is the resident (planar) layout of one tensor.
type Resident struct {
	Layout  codecs.Layout // the pack's layout of the tensor
	Off     [3]int64      // plane offsets from the tensor's start (0 for a plane the format lacks)
	Row     [3]int64      // bytes per row of each plane (0: not a row plane, nvfp4's gscale)
	Size    int64         // bytes of the whole resident tensor
	MatRows int64         // rows of one matrix (nvfp4's matrix scales), ≥ 1
	Code    uint32        // dgq_decode's format code (FmtF32, …)
	Bits    uint32        // bits per code of an affine format (q4, q5, q6); 0 otherwise
}

// ResidentLayout returns the resident layout of a tensor of format f, dtype
// dt and geometry m. A format without a device decoder (one that is neither
// raw bf16/f16/f32 nor q8, q4, q5, q6, nvfp4) is an error wrapping
// ErrNoDecoder.
func ResidentLayout(f codecs.Format, dt codecs.DType, m codecs.Matrix) (Resident, error) {
	l, err := f.Layout(dt, m)
	if err != nil {
		return Resident{}, err
	}
	p := Resident{Layout: l, MatRows: max(l.MatRows, 1)}
	var sizes [3]int64
	switch {
	case f == codecs.Raw && (dt == codecs.F32 || dt == codecs.BF16 || dt == codecs.F16):
		p.Row[0] = l.RowBytes
		p.Code = map[codecs.DType]uint32{codecs.F32: FmtF32, codecs.BF16: FmtBF16, codecs.F16: FmtF16}[dt]
	case f == codecs.Q8:
		p.Row[0], p.Row[1] = m.K, 4
		p.Code = FmtQ8
	case f == codecs.Q4 || f == codecs.Q5 || f == codecs.Q6:
		p.Row[0] = m.K * int64(f.Bits()) / 8
		p.Row[1], p.Row[2] = m.K/32*2, m.K/32*2
		p.Code, p.Bits = FmtAffine, uint32(f.Bits())
	case f == codecs.NVFP4:
		p.Row[0], p.Row[1] = m.K/2, m.K/16
		sizes[2] = 4 * l.Matrices
		p.Code = FmtNVFP4
	default:
		return Resident{}, fmt.Errorf("%w: %s %s", ErrNoDecoder, f, dt)
	}
	var off int64
	for i := range 3 {
		if sizes[i] == 0 {
			sizes[i] = m.Rows * p.Row[i] // ≤ the pack's size: no overflow
		}
		if sizes[i] == 0 {
			continue
		}
		off = (off + PlaneAlign - 1) &^ (PlaneAlign - 1)
		p.Off[i] = off
		off += sizes[i]
	}
	p.Size = off
	return p, nil
}

// PlaneAt returns the byte offset of plane i at row r0 (row planes advanced
// by r0 rows; nvfp4's matrix scales stay at matrix 0).
func (p Resident) PlaneAt(i int, r0 int64) int64 { return p.Off[i] + r0*p.Row[i] }
