package codecs

import "fmt"

// DecodeRows is the scalar reference decoder. enc holds the whole encoded
// tensor (EncodedSize bytes); dst receives the n·K float32 values of rows
// [r0, r0+n). It never panics on an input of the right length: any byte
// pattern decodes to some float32 values (NaN included, e.g. from fp16 or
// E4M3 NaN scales).
func DecodeRows(f Format, dt DType, m Matrix, enc []byte, r0, n int64, dst []float32) error {
	planes, err := f.Planes(dt, m)
	if err != nil {
		return err
	}
	last := planes[len(planes)-1]
	if size := last.Offset + last.Size; int64(len(enc)) != size {
		return fmt.Errorf("%w: %s tensor has %d bytes, want %d", ErrBuffer, f, len(enc), size)
	}
	if r0 < 0 || n < 0 || r0 > m.Rows || n > m.Rows-r0 {
		return fmt.Errorf("%w: rows %d..%d+%d outside 0..%d", ErrBuffer, r0, r0, n, m.Rows)
	}
	if int64(len(dst)) != n*m.K {
		return fmt.Errorf("%w: destination has %d values, %d rows need %d", ErrBuffer, len(dst), n, n*m.K)
	}
	switch f {
	case Raw:
		rb := m.K * int64(dt.Size())
		toFloat32(dt, enc[r0*rb:(r0+n)*rb], dst)
	case Q8:
		decodeQ8(planes, m.K, enc, r0, n, dst)
	case Q4, Q5, Q6:
		decodeAffine(f, planes, m.K, enc, r0, n, dst)
	case NVFP4:
		decodeNVFP4(planes, m.K, enc, r0, n, dst)
	}
	return nil
}
