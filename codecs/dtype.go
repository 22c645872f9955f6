package codecs

import "fmt"

// DType is the element type of a source tensor. The numeric values are part
// of no file format (manifests store the text form) but are fixed so that
// tables indexed by DType stay stable.
type DType uint8

const (
	DTypeInvalid DType = 0
	BF16         DType = 1
	F16          DType = 2
	F32          DType = 3
)

var dtypeNames = [...]string{DTypeInvalid: "invalid", BF16: "BF16", F16: "F16", F32: "F32"}

// String returns the safetensors spelling of the dtype ("BF16", "F16", "F32").
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the number of bytes of one element (0 for an invalid dtype).
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	}
	return 0
}

// Valid reports whether d is one of the supported dtypes.
func (d DType) Valid() bool { return d.Size() != 0 }

// ParseDType parses the safetensors spelling of a supported dtype.
func ParseDType(s string) (DType, error) {
	for d := BF16; d <= F32; d++ {
		if dtypeNames[d] == s {
			return d, nil
		}
	}
	return DTypeInvalid, fmt.Errorf("%w: %q (supported: BF16, F16, F32)", ErrUnknownDType, s)
}

// MarshalText implements encoding.TextMarshaler.
func (d DType) MarshalText() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownDType, uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
