package enginepack

import (
	"encoding/binary"
	"fmt"
	"math"
)

// BF16Trunc returns the bfloat16 bits of f as the engine stores its scales
// and minimums: the top 16 bits of the float32, with no rounding.
func BF16Trunc(f float32) uint16 {
	return uint16(math.Float32bits(f) >> 16)
}

// bf16ToFloat32 widens bfloat16 bits exactly.
func bf16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// f16ToFloat32 widens IEEE half-precision bits exactly.
func f16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: frac * 2^-24, exact in float32.
	v := float32(math.Ldexp(float64(frac), -24))
	if sign != 0 {
		v = -v
	}
	return v
}

// DecodeElements widens little-endian tensor bytes of the given safetensors
// dtype ("BF16", "F16" or "F32") to float32, exactly.
func DecodeElements(dtype string, b []byte) ([]float32, error) {
	size, ok := map[string]int{"BF16": 2, "F16": 2, "F32": 4}[dtype]
	if !ok {
		return nil, fmt.Errorf("enginepack: decode elements: unsupported dtype %q", dtype)
	}
	if len(b)%size != 0 {
		return nil, fmt.Errorf("enginepack: decode elements: %d bytes is not a whole number of %s", len(b), dtype)
	}
	out := make([]float32, len(b)/size)
	for i := range out {
		switch dtype {
		case "BF16":
			out[i] = bf16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		case "F16":
			out[i] = f16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return out, nil
}

// rustMin is f32::min as the engine's build computes it: a NaN operand is
// ignored, and on a tie (including +0 against -0) the running value acc is
// kept. Rust leaves the signed-zero case unspecified; this is what LLVM's
// x86-64 lowering does, and the codec vectors were made on x86-64.
func rustMin(acc, v float32) float32 {
	if v != v {
		return acc
	}
	if acc != acc || v < acc {
		return v
	}
	return acc
}

// rustMax is the f32::max counterpart of rustMin.
func rustMax(acc, v float32) float32 {
	if v != v {
		return acc
	}
	if acc != acc || v > acc {
		return v
	}
	return acc
}

// roundHalfAway is Rust's f32::round: halves go away from zero. Widening to
// float64 is exact and every rounded float32 fits back exactly.
func roundHalfAway(x float32) float32 {
	return float32(math.Round(float64(x)))
}

// clampF32 is Rust's f32::clamp: NaN passes through unchanged.
func clampF32(x, lo, hi float32) float32 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

// castU8 is Rust's saturating `as u8`: NaN becomes 0, fractions truncate.
func castU8(x float32) uint8 {
	switch {
	case x != x || x <= 0:
		return 0
	case x >= 255:
		return 255
	}
	return uint8(x)
}

// castI8 is Rust's saturating `as i8`.
func castI8(x float32) int8 {
	switch {
	case x != x:
		return 0
	case x <= -128:
		return -128
	case x >= 127:
		return 127
	}
	return int8(x)
}

// E4M3FromFloat32 converts f to FP8 E4M3 (the e4m3fn variant) bit for bit as
// the engine does: round to nearest even, saturating to 0x7E (448) for
// anything at or past the largest finite value (NaN included), with
// subnormal results produced by a float32 addition of 2^14.
func E4M3FromFloat32(f float32) uint8 {
	const (
		saturateAt  = uint32(543) << 21 // first magnitude that rounds past 448
		normalMin   = uint32(121) << 23 // 2^-6, the smallest normal E4M3
		subnormBias = uint32(141) << 23 // bits of 2^14
	)
	bits := math.Float32bits(f)
	sign := uint8((bits >> 24) & 0x80)
	mag := bits &^ (1 << 31)
	switch {
	case mag >= saturateAt:
		return sign | 0x7e
	case mag < normalMin:
		sum := math.Float32frombits(mag) + math.Float32frombits(subnormBias)
		return sign | uint8(math.Float32bits(sum)-subnormBias)
	}
	odd := (mag >> 20) & 1
	// 0xC4000000 is (7-127)<<23 modulo 2^32: it moves the exponent from
	// float32's bias to E4M3's; 0x7FFFF plus the odd bit rounds to even.
	mag += 0xc4000000 + 0x7ffff + odd
	return sign | uint8(mag>>20)
}

// E4M3ToFloat32 decodes FP8 E4M3 (e4m3fn): exponent 0 is subnormal
// (m * 2^-9), 0x7F/0xFF is NaN, and there is no infinity.
func E4M3ToFloat32(b uint8) float32 {
	e := int(b>>3) & 0xf
	m := float64(b & 7)
	var v float64
	switch {
	case e == 0:
		v = math.Ldexp(m, -9)
	case e == 15 && m == 7:
		v = math.NaN()
	default:
		v = math.Ldexp(1+m/8, e-7)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// E2M1FromFloat32 quantizes x to an FP4 E2M1 nibble with the engine's
// thresholds (ties at 0.75, 1.75 and 3.5 go up, ties at 0.25, 1.25, 2.5 and
// 5 go down). NaN gives 0x7; the sign bit 0x8 follows the sign of x, so a
// negative value that rounds to zero gives 0x8 (negative zero).
func E2M1FromFloat32(x float32) uint8 {
	if x != x {
		return 0x7
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x8
	}
	a := float32(math.Abs(float64(x)))
	var code uint8
	switch {
	case a > 5:
		code = 7
	case a >= 3.5:
		code = 6
	case a > 2.5:
		code = 5
	case a >= 1.75:
		code = 4
	case a > 1.25:
		code = 3
	case a >= 0.75:
		code = 2
	case a > 0.25:
		code = 1
	}
	return sign | code
}
