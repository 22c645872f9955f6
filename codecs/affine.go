package codecs

import (
	"encoding/binary"
	"math"
)

// q4_block, q5_block, q6_block: a row of K elements is K/32 blocks; a block
// is [delta bf16][min bf16][32 codes of b bits, LSB-first] (b = 4, 5, 6; 20,
// 24 or 28 bytes). LSB-first packing puts element 2j in the low nibble of
// byte j for q4 and makes every 3 bytes of q6 a little-endian 24-bit word
// holding 4 codes, 6 bits each from the low end: both are the engine's
// packings. An element decodes as float32(float32(code)·delta) + min (two
// float32 roundings, no fused multiply-add).

// encodeAffineRow encodes one row of finite values x into row with the
// min/max encoder. It returns the first group whose step overflows to
// infinity (which the engine would write), or -1.
func encodeAffineRow(bits int, row []byte, x []float32, sc *scratch, st *Stats) int {
	bb := 4 + 4*bits
	groups := len(x) / 32
	codes := sc.codes(32 * groups)
	nmax := float32(int(1)<<bits - 1)
	for g := range groups {
		grp, c := (*[32]float32)(x[g*32:g*32+32]), (*[32]uint8)(codes[g*32:])
		d, m := minmaxAffineGroup(nmax, grp, c)
		if BF16ToFloat32(d) > math.MaxFloat32 {
			return g
		}
		affineStats(grp, c, d, m, st)
		putAffineBlock(row[g*bb:(g+1)*bb], d, m, c, bits)
	}
	return -1
}

// searchAffineRowsBand is the number of groups searched per batch: rows are
// searched together (groups are independent), so batches of the SIMD kernel
// stay full whatever K is.
const searchAffineRowsBand = 4096

// searchAffineRows encodes whole rows of finite source values with the
// searching encoder into dst, the rows' blocks back to back, and returns
// their statistics (merged in group order, as row-by-row encoding would).
func searchAffineRows(dt DType, bits int, dst, src []byte) Stats {
	bb := 4 + 4*bits
	total := len(src) / dt.Size() / 32
	band := min(total, searchAffineRowsBand)
	x := make([]float32, 32*band)
	codes := make([]uint8, 32*band)
	res := make([]affineResult, band)
	var st Stats
	for g0 := 0; g0 < total; g0 += band {
		n := min(band, total-g0)
		toFloat32(dt, src[g0*32*dt.Size():], x[:32*n])
		searchAffineGroups(bits, x[:32*n], codes[:32*n], res[:n])
		for g, r := range res[:n] {
			st.mergeGroup(r.sumSqErr, r.sumSqRef, r.maxAbsErr, 32)
			putAffineBlock(dst[(g0+g)*bb:(g0+g+1)*bb], r.delta, r.min, (*[32]uint8)(codes[g*32:]), bits)
		}
	}
	return st
}

// putAffineBlock writes one block: delta, min, then the packed codes.
func putAffineBlock(blk []byte, d, m uint16, codes *[32]uint8, bits int) {
	binary.LittleEndian.PutUint16(blk[0:], d)
	binary.LittleEndian.PutUint16(blk[2:], m)
	packCodes(blk[4:], codes, bits)
}

// bf16Trunc is the engine's float32 → bf16 conversion: the top 16 bits.
func bf16Trunc(v float32) uint16 { return uint16(math.Float32bits(v) >> 16) }

// roundHalfAway rounds t to the nearest integer, halves away from zero (the
// engine's f32::round).
func roundHalfAway(t float32) float32 { return float32(math.Round(float64(t))) }

// minmaxAffineGroup is the engine's group encoder: min/max parameters; the
// codes are computed with the unrounded float32 delta and min, which are
// then stored truncated to bf16.
func minmaxAffineGroup(nmax float32, x *[32]float32, codes *[32]uint8) (d, m uint16) {
	// Strict comparisons keep the first of equal values: min(+0, −0) is the
	// zero seen first, as the engine's f32::min does on x86-64 (on aarch64 it
	// may return −0; docs/format.md §5 notes the ambiguity).
	mn, mx := x[0], x[0]
	for _, v := range x {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	delta := float32(1)
	if !(mx-mn < 1e-8) {
		delta = (mx - mn) / nmax
	}
	for j, v := range x {
		q := roundHalfAway((v - mn) / delta)
		if !(q > 0) { // NaN (an infinite step) saturates to 0, as Rust's cast does
			q = 0
		}
		codes[j] = uint8(min(q, nmax))
	}
	return bf16Trunc(delta), bf16Trunc(mn)
}

// affineStats adds the error of a group decoded with bf16 delta d and min m.
func affineStats(x *[32]float32, codes *[32]uint8, d, m uint16, st *Stats) {
	df, mf := BF16ToFloat32(d), BF16ToFloat32(m)
	for j, v := range x {
		st.add(float32(float32(codes[j])*df)+mf, v)
	}
}

// packCodes writes 32 codes of width bits as an LSB-first bit string into
// out (4·bits bytes).
func packCodes(out []byte, codes *[32]uint8, bits int) {
	out = out[:4*bits]
	if bits == 4 { // nibbles, the common case
		for j := range out {
			out[j] = codes[2*j] | codes[2*j+1]<<4
		}
		return
	}
	var acc uint64
	nacc, o := 0, 0
	for _, c := range codes {
		acc |= uint64(c) << nacc
		nacc += bits
		for nacc >= 8 {
			out[o] = byte(acc)
			o++
			acc >>= 8
			nacc -= 8
		}
	}
}

// unpackCodes is the inverse of packCodes.
func unpackCodes(in []byte, codes *[32]uint8, bits int) {
	in = in[:4*bits]
	mask := uint64(1)<<bits - 1
	var acc uint64
	nacc, i := 0, 0
	for j := range codes {
		for nacc < bits {
			acc |= uint64(in[i]) << nacc
			i++
			nacc += 8
		}
		codes[j] = uint8(acc & mask)
		acc >>= bits
		nacc -= bits
	}
}

// mergeGroup adds one group's error terms.
func (s *Stats) mergeGroup(sumSqErr, sumSqRef, maxAbsErr float64, n int64) {
	s.SumSqErr += sumSqErr
	s.SumSqRef += sumSqRef
	if maxAbsErr > s.MaxAbsErr {
		s.MaxAbsErr = maxAbsErr
	}
	s.N += n
}

// decodeAffineRow decodes one encoded row into dst (K values).
func decodeAffineRow(bits int, row []byte, dst []float32) {
	bb := 4 + 4*bits
	var codes [32]uint8
	for g := 0; g*32 < len(dst); g++ {
		blk := row[g*bb : (g+1)*bb]
		d := BF16ToFloat32(binary.LittleEndian.Uint16(blk))
		m := BF16ToFloat32(binary.LittleEndian.Uint16(blk[2:]))
		unpackCodes(blk[4:], &codes, bits)
		out := dst[g*32 : g*32+32]
		for j, c := range codes {
			out[j] = float32(float32(c)*d) + m
		}
	}
}
