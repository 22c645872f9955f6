package codecs

import "math"

// BF16ToFloat32 widens a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 rounds f to bfloat16 with round-to-nearest-even. NaNs stay
// NaN (quieted); infinities and overflow to infinity follow IEEE rounding.
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToFloat32 widens an IEEE binary16 bit pattern to float32 (exact,
// including subnormals, infinities and NaN payloads).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant·2^-24, exact in float32.
	v := float32(mant) * (1.0 / (1 << 24))
	return math.Float32frombits(sign | math.Float32bits(v))
}

// Float32ToF16 rounds f to IEEE binary16 with round-to-nearest-even,
// producing subnormals below 2^-14, infinity from 65520 up, and a quiet NaN
// for NaN.
func Float32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN: keep the top payload bits, force quiet
		return sign | 0x7e00 | uint16(a>>13)&0x1ff
	case a >= 0x477ff000: // ≥ 65520 rounds to infinity
		return sign | 0x7c00
	case a >= 0x38800000: // normal (≥ 2^-14)
		r := a - 112<<23
		r += 0xfff + (r>>13)&1
		return sign | uint16(r>>13)
	case a <= 0x33000000: // ≤ 2^-25 rounds to zero (2^-25 is a tie → even 0)
		return sign
	}
	// Subnormal result: round a's significand to a multiple of 2^-24.
	e := a >> 23
	mant := a&0x7fffff | 0x800000
	shift := 126 - e // 14..24
	q := mant >> shift
	rem := mant & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return sign | uint16(q)
}
