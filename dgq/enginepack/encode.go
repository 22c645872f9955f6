package enginepack

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Bytes per 32-value group of q4_block and q6_block: bf16 delta, bf16 min,
// then the codes.
const (
	q4BlockBytes = 4 + groupAff/2
	q6BlockBytes = 4 + groupAff*6/8
)

// MatrixBytes is the encoded size of one [n, k] matrix of a quantized kind.
func MatrixBytes(kind string, n, k int64) (int64, error) {
	switch kind {
	case KindQ4:
		return n * (k / groupAff) * q4BlockBytes, nil
	case KindQ6:
		return n * (k / groupAff) * q6BlockBytes, nil
	case KindQ8:
		return n * (2 + k), nil
	case KindNVFP4:
		return 4 + n*(k/2+k/groupNVFP4), nil
	}
	return 0, fmt.Errorf("enginepack: matrix size: %q is not a quantized kind", kind)
}

// EncodeTensor encodes a tensor's source bytes (safetensors dtype BF16, F16
// or F32) as kind. Rank 2 is one [n, k] matrix; rank 3 [e, n, k] is e
// matrices back to back (q8_row takes rank 2 only). The values are widened
// to float32 exactly and then encoded as the engine encodes bf16 input.
func EncodeTensor(kind, dtype string, data []byte, shape []int64) ([]byte, error) {
	if err := ValidateFormatDims("tensor", shape, kind); err != nil {
		return nil, err
	}
	vals, err := DecodeElements(dtype, data)
	if err != nil {
		return nil, err
	}
	mats, n, k, err := matrixShape(shape, kind)
	if err != nil {
		return nil, err
	}
	if int64(len(vals)) != mats*n*k {
		return nil, fmt.Errorf("enginepack: encode %s: %d values for shape %v", kind, len(vals), shape)
	}
	var out []byte
	for m := range mats {
		enc, err := EncodeMatrix(kind, vals[m*n*k:(m+1)*n*k], int(n), int(k))
		if err != nil {
			return nil, err
		}
		out = append(out, enc...)
	}
	return out, nil
}

func matrixShape(shape []int64, kind string) (mats, n, k int64, err error) {
	switch {
	case len(shape) == 2:
		return 1, shape[0], shape[1], nil
	case len(shape) == 3 && kind != KindQ8:
		return shape[0], shape[1], shape[2], nil
	}
	return 0, 0, 0, fmt.Errorf("enginepack: encode %s: unsupported shape %v", kind, shape)
}

// EncodeMatrix encodes one row-major [n, k] float32 matrix as kind with the
// engine's min/max encoders. k must suit the kind (see ValidateFormatDims).
func EncodeMatrix(kind string, vals []float32, n, k int) ([]byte, error) {
	if len(vals) != n*k {
		return nil, fmt.Errorf("enginepack: encode %s: %d values for [%d, %d]", kind, len(vals), n, k)
	}
	if err := ValidateFormatDims("matrix", []int64{int64(n), int64(k)}, kind); err != nil {
		return nil, err
	}
	var row func(dst []byte, x []float32) []byte
	switch kind {
	case KindQ4:
		row = func(dst []byte, x []float32) []byte { return affineRow(dst, x, 4) }
	case KindQ6:
		row = func(dst []byte, x []float32) []byte { return affineRow(dst, x, 6) }
	case KindQ8:
		row = q8Row
	case KindNVFP4:
		row = nvfp4Row
	default:
		return nil, fmt.Errorf("enginepack: encode: %q is not a quantized kind", kind)
	}
	var out []byte
	if kind == KindNVFP4 {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(1))
	}
	for r := range n {
		out = row(out, vals[r*k:(r+1)*k])
	}
	return out, nil
}

// affineRow appends one row of q4_block (bits 4) or q6_block (bits 6).
func affineRow(dst []byte, x []float32, bits int) []byte {
	for g := 0; g < len(x); g += groupAff {
		dst = affineGroup(dst, x[g:g+groupAff], bits)
	}
	return dst
}

// affineGroup: delta = (max-min)/(2^bits-1), or 1 when the range is below
// 1e-8; codes use the unrounded delta and min, which are then stored as
// truncated bf16.
func affineGroup(dst []byte, x []float32, bits int) []byte {
	top := float32(int(1)<<bits - 1)
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range x {
		lo, hi = rustMin(lo, v), rustMax(hi, v)
	}
	if lo == float32(math.Inf(1)) { // every value NaN or +Inf
		lo, hi = 0, 0
	}
	delta := float32(1)
	if !(hi-lo < 1e-8) {
		delta = (hi - lo) / top
	}
	dst = binary.LittleEndian.AppendUint16(dst, BF16Trunc(delta))
	dst = binary.LittleEndian.AppendUint16(dst, BF16Trunc(lo))
	codes := make([]uint8, len(x))
	for j, v := range x {
		if !(delta <= 0) {
			codes[j] = castU8(clampF32(roundHalfAway((v-lo)/delta), 0, top))
		}
	}
	if bits == 4 {
		return packNibbles(dst, codes)
	}
	return packSixBits(dst, codes)
}

// packNibbles: element 2j in the low nibble, 2j+1 in the high nibble.
func packNibbles(dst []byte, codes []uint8) []byte {
	for j := 0; j < len(codes); j += 2 {
		dst = append(dst, codes[j]&0xf|codes[j+1]<<4)
	}
	return dst
}

// packSixBits: four codes per little-endian 24-bit word.
func packSixBits(dst []byte, codes []uint8) []byte {
	for w := 0; w < len(codes); w += 4 {
		v := uint32(codes[w]) | uint32(codes[w+1])<<6 | uint32(codes[w+2])<<12 | uint32(codes[w+3])<<18
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16))
	}
	return dst
}

// q8Row appends [bf16 scale][k int8]: scale = max|x|/127, or 1 when that
// maximum is below 1e-8; codes use the unrounded scale.
func q8Row(dst []byte, x []float32) []byte {
	var amax float32
	for _, v := range x {
		amax = rustMax(amax, abs32(v))
	}
	scale := float32(1)
	if !(amax < 1e-8) {
		scale = amax / 127
	}
	dst = binary.LittleEndian.AppendUint16(dst, BF16Trunc(scale))
	for _, v := range x {
		dst = append(dst, byte(castI8(clampF32(roundHalfAway(v/scale), -127, 127))))
	}
	return dst
}

// nvfp4Row appends one row: k/2 bytes of E2M1 nibbles (even element low),
// then k/16 E4M3 block scales. The matrix scale is 1, so values are used as
// they are.
func nvfp4Row(dst []byte, x []float32) []byte {
	codes := make([]uint8, len(x))
	scales := make([]byte, 0, len(x)/groupNVFP4)
	for g := 0; g < len(x); g += groupNVFP4 {
		sbits := nvfp4Block(codes[g:g+groupNVFP4], x[g:g+groupNVFP4])
		scales = append(scales, sbits)
	}
	dst = packNibbles(dst, codes)
	return append(dst, scales...)
}

// nvfp4Block fills one block's codes and returns its E4M3 scale: the block
// maximum over 6 (0 when the maximum is below 1e-12), rounded to E4M3, and
// each value divided by the rounded scale.
func nvfp4Block(codes []uint8, x []float32) uint8 {
	var amax float32
	for _, v := range x {
		amax = rustMax(amax, abs32(v))
	}
	var want float32
	if !(amax < 1e-12) {
		want = amax / 6
	}
	sbits := E4M3FromFloat32(want)
	s := E4M3ToFloat32(sbits)
	for j, v := range x {
		if s != 0 {
			codes[j] = E2M1FromFloat32(v / s)
		}
	}
	return sbits
}

func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}
