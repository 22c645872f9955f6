package codecs

import "math"

// FP8 E4M3 ("fn" variant, as used by NVFP4 block scales): 1 sign bit, 4
// exponent bits with bias 7, 3 mantissa bits; no infinities; 0x7F and 0xFF
// are NaN; largest finite value 448, smallest subnormal 2^-9.

// E4M3Max is the largest finite E4M3 value.
const E4M3Max = 448

// e4m3MaxCode is the code of +448.
const e4m3MaxCode = 0x7e

// E4M3ToFloat32 decodes an E4M3 byte (exact).
func E4M3ToFloat32(b uint8) float32 {
	v := e4m3Mag(b & 0x7f)
	if b&0x80 != 0 {
		return -v
	}
	return v
}

func e4m3Mag(b uint8) float32 {
	e := b >> 3
	m := float32(b & 7)
	switch {
	case b == 0x7f:
		return float32(math.NaN())
	case e == 0:
		return m * (1.0 / 512)
	}
	return (8 + m) * math.Float32frombits(uint32(e+117)<<23) // (8+m)·2^(e-10)
}

// Float32ToE4M3 rounds f to E4M3 with round-to-nearest-even over the whole
// range (subnormals and the 256..448 binade included). Magnitudes from 448
// up, infinities included, saturate to ±448 (0x7E/0xFE); NaN gives 0x7F.
func Float32ToE4M3(f float32) uint8 {
	u := math.Float32bits(f)
	sign := uint8(u>>24) & 0x80
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return 0x7f
	case a >= 0x43e00000: // ≥ 448
		return sign | e4m3MaxCode
	case a >= 0x3c800000: // ≥ 2^-6: normal
		r := a - 120<<23
		r += 0x7ffff + (r>>20)&1
		return sign | uint8(r>>20)
	}
	// Subnormal range: code = RNE(|f|·2^9), 0..8 (8 is the smallest normal).
	v := float32(math.Float32frombits(a) * 512)
	v = v + 8388608 - 8388608
	return sign | uint8(v)
}
