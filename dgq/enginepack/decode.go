package enginepack

import (
	"encoding/binary"
	"fmt"
	"math"
)

// e2m1Magnitudes are the E2M1 magnitudes of the low three bits of a code.
var e2m1Magnitudes = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// e2m1ToFloat32 decodes one E2M1 nibble (sign in bit 3).
func e2m1ToFloat32(c uint8) float32 {
	v := e2m1Magnitudes[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// Decode is the engine's CPU dequantizer for one tensor's stored bytes:
// raw dtype values widened, q4/q6 blocks delta·q + min, q8 rows q·scale,
// nvfp4 (e2m1·s)·g with g the f32 at the start of each matrix. It returns
// the rows·K values in row-major order.
func Decode(kind, dtype string, data []byte, shape []int64) ([]float32, error) {
	if kind == KindRaw {
		return DecodeElements(dtype, data)
	}
	mats, n, k, err := matrixShape(shape, kind)
	if err != nil {
		return nil, err
	}
	per, err := MatrixBytes(kind, n, k)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != mats*per {
		return nil, fmt.Errorf("enginepack: decode %s %v: %d bytes, want %d", kind, shape, len(data), mats*per)
	}
	out := make([]float32, 0, mats*n*k)
	for m := range mats {
		mat := data[m*per : (m+1)*per]
		g := float32(1)
		if kind == KindNVFP4 {
			g = math.Float32frombits(binary.LittleEndian.Uint32(mat))
			mat = mat[4:]
		}
		rowBytes := int64(len(mat)) / n
		for r := range n {
			out = decodeRow(out, kind, mat[r*rowBytes:(r+1)*rowBytes], k, g)
		}
	}
	return out, nil
}

// decodeRow appends the k values of one stored row.
func decodeRow(out []float32, kind string, row []byte, k int64, g float32) []float32 {
	switch kind {
	case KindQ8:
		s := bf16ToFloat32(binary.LittleEndian.Uint16(row))
		for i := range k {
			out = append(out, float32(int8(row[2+i]))*s)
		}
	case KindQ4, KindQ6:
		bits := map[string]int64{KindQ4: 4, KindQ6: 6}[kind]
		bb := 4 + 4*bits
		for b := range k / 32 {
			blk := row[b*bb : (b+1)*bb]
			d := bf16ToFloat32(binary.LittleEndian.Uint16(blk))
			mn := bf16ToFloat32(binary.LittleEndian.Uint16(blk[2:]))
			for j := range int64(32) {
				out = append(out, float32(float32(code(blk[4:], j, bits))*d)+mn)
			}
		}
	case KindNVFP4:
		data, scales := row[:k/2], row[k/2:]
		for i := range k {
			c := data[i/2] >> (4 * (i % 2)) & 15
			out = append(out, float32(float32(e2m1ToFloat32(c)*E4M3ToFloat32(scales[i/16]))*g))
		}
	}
	return out
}

// code extracts code j of a q4 block (nibbles, low first) or a q6 block
// (24-bit little-endian words of four 6-bit codes).
func code(codes []byte, j, bits int64) uint32 {
	if bits == 4 {
		return uint32(codes[j/2]>>(4*(j%2))) & 15
	}
	w := codes[3*(j/4):]
	v := uint32(w[0]) | uint32(w[1])<<8 | uint32(w[2])<<16
	return v >> (6 * (j % 4)) & 63
}
