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
	if absMaxBits(dt, src) < infBits(dt) {
		return -1
	}
	switch dt {
	case BF16:
		for i := 0; i+1 < len(src); i += 2 {
			if binary.LittleEndian.Uint16(src[i:])&0x7f80 == 0x7f80 {
				return i / 2
			}
		}
	case F16:
		for i := 0; i+1 < len(src); i += 2 {
			if binary.LittleEndian.Uint16(src[i:])&0x7c00 == 0x7c00 {
				return i / 2
			}
		}
	case F32:
		for i := 0; i+3 < len(src); i += 4 {
			if binary.LittleEndian.Uint32(src[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	}
	return -1
}

// absMaxBits returns the largest magnitude bit pattern (sign bit cleared)
// of the whole elements of src. It is ≥ infBits(dt) exactly when one of them
// is NaN or infinite; for finite elements the patterns order like |x|.
func absMaxBits(dt DType, src []byte) uint32 {
	var m0, m1, m2, m3 uint32
	if scanFast != nil {
		var n int
		m0, n = scanFast(dt, src)
		src = src[n:]
	}
	switch dt {
	case BF16, F16:
		i := 0
		for ; i+8 <= len(src); i += 8 {
			w := binary.LittleEndian.Uint64(src[i:]) & 0x7fff7fff7fff7fff
			m0 = max(m0, uint32(w)&0xffff)
			m1 = max(m1, uint32(w>>16)&0xffff)
			m2 = max(m2, uint32(w>>32)&0xffff)
			m3 = max(m3, uint32(w>>48))
		}
		for ; i+2 <= len(src); i += 2 {
			m0 = max(m0, uint32(binary.LittleEndian.Uint16(src[i:]))&0x7fff)
		}
	case F32:
		i := 0
		for ; i+8 <= len(src); i += 8 {
			w := binary.LittleEndian.Uint64(src[i:]) & 0x7fffffff7fffffff
			m0 = max(m0, uint32(w))
			m1 = max(m1, uint32(w>>32))
		}
		for ; i+4 <= len(src); i += 4 {
			m0 = max(m0, binary.LittleEndian.Uint32(src[i:])&0x7fffffff)
		}
	}
	return max(m0, m1, m2, m3)
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
