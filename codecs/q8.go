package codecs

import (
	"encoding/binary"
	"math"
)

// q8_row: every row is [scale bf16][K int8 codes]; an element decodes as
// float32(code)·scale. Codes lie in [-127, 127].

// encodeQ8Row encodes one row of finite values x into row.
func encodeQ8Row(method Method, row []byte, x []float32, sc *scratch, st *Stats) {
	codes := sc.int8s(len(x))
	var s uint16
	if method == MinMax {
		s = minmaxQ8Row(x, codes)
		sf := BF16ToFloat32(s)
		for i, v := range x {
			st.add(float32(codes[i])*sf, v)
		}
	} else {
		var se, sr, ma float64
		s, se, sr, ma = searchQ8Row(x, codes)
		st.mergeGroup(se, sr, ma, int64(len(x)))
	}
	binary.LittleEndian.PutUint16(row, s)
	for i, c := range codes {
		row[q8ScaleBytes+i] = byte(c)
	}
}

// minmaxQ8Row is the engine's row encoder: scale amax/127 (1 for rows
// below 1e-8), codes from the unrounded scale, scale stored truncated.
func minmaxQ8Row(x []float32, codes []int8) uint16 {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	scale := float32(1)
	if !(amax < 1e-8) {
		scale = amax / 127
	}
	for i, v := range x {
		q := roundHalfAway(v / scale)
		if q != q { // NaN saturates to 0, as Rust's cast does
			q = 0
		}
		codes[i] = int8(min(max(q, -127), 127))
	}
	return bf16Trunc(scale)
}

// decodeQ8Row decodes one encoded row into dst.
func decodeQ8Row(row []byte, dst []float32) {
	s := BF16ToFloat32(binary.LittleEndian.Uint16(row))
	for i := range dst {
		dst[i] = float32(int8(row[q8ScaleBytes+i])) * s
	}
}
