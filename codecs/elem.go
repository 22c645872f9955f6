package codecs

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ToFloat32 converts len(dst) source elements of dtype dt to float32
// (exactly: every BF16, F16 and F32 value is a float32). src must hold
// exactly len(dst)·dt.Size() bytes.
func ToFloat32(dt DType, src []byte, dst []float32) error {
	if !dt.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownDType, uint8(dt))
	}
	if len(src) != len(dst)*dt.Size() {
		return fmt.Errorf("%w: %d source bytes for %d %s elements", ErrBuffer, len(src), len(dst), dt)
	}
	toFloat32(dt, src, dst)
	return nil
}

// toFloat32 is ToFloat32 without checks; len(src) ≥ len(dst)·dt.Size().
func toFloat32(dt DType, src []byte, dst []float32) {
	switch dt {
	case BF16:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case F16:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F32:
		src = src[:4*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
}

// CheckFinite reports the first NaN or infinity in src (whole elements of
// dtype dt) as an error wrapping ErrNonFinite with the element index.
func CheckFinite(dt DType, src []byte) error {
	if !dt.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownDType, uint8(dt))
	}
	if len(src)%dt.Size() != 0 {
		return fmt.Errorf("%w: %d bytes is not a whole number of %s elements", ErrBuffer, len(src), dt)
	}
	if i := firstNonFinite(dt, src); i >= 0 {
		return fmt.Errorf("%w: element %d", ErrNonFinite, i)
	}
	return nil
}

// firstNonFinite returns the index of the first NaN/Inf element, or -1.
func firstNonFinite(dt DType, src []byte) int {
	start := 0
	if scanFast != nil {
		if bits, n := scanFast(dt, src); bits < infBits(dt) {
			start = n // that prefix is finite
		}
	}
	switch dt {
	case BF16:
		for i := start; i+1 < len(src); i += 2 {
			if binary.LittleEndian.Uint16(src[i:])&0x7f80 == 0x7f80 {
				return i / 2
			}
		}
	case F16:
		for i := start; i+1 < len(src); i += 2 {
			if binary.LittleEndian.Uint16(src[i:])&0x7c00 == 0x7c00 {
				return i / 2
			}
		}
	case F32:
		for i := start; i+3 < len(src); i += 4 {
			if binary.LittleEndian.Uint32(src[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	}
	return -1
}

// infBits is the bit pattern of +Inf in dtype dt: an element is NaN or
// infinite exactly when its magnitude bits (sign cleared) are ≥ infBits.
func infBits(dt DType) uint32 {
	switch dt {
	case BF16:
		return 0x7f80
	case F16:
		return 0x7c00
	}
	return 0x7f800000
}

// absBitsToFloat32 is the float32 value of a magnitude bit pattern of dtype
// dt (finite).
func absBitsToFloat32(dt DType, bits uint32) float32 {
	switch dt {
	case BF16:
		return BF16ToFloat32(uint16(bits))
	case F16:
		return F16ToFloat32(uint16(bits))
	}
	return math.Float32frombits(bits)
}

// nonFiniteAt builds the error for a NaN/Inf at flat element index idx of a
// block of rows starting at row r0 with k columns.
func nonFiniteAt(r0, k, idx int64) error {
	return fmt.Errorf("%w: row %d column %d", ErrNonFinite, r0+idx/k, idx%k)
}
