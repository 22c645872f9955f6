package codecs

import "fmt"

// DecodeRows is the scalar reference decoder. enc holds the whole encoded
// tensor (EncodedSize bytes); dst receives the n·K float32 values of rows
// [r0, r0+n). It never panics on an input of the right length: any byte
// pattern decodes to some float32 values (NaN included, e.g. from bf16 or
// E4M3 NaN parameters).
func DecodeRows(f Format, dt DType, m Matrix, enc []byte, r0, n int64, dst []float32) error {
	l, err := f.Layout(dt, m)
	if err != nil {
		return err
	}
	if int64(len(enc)) != l.Size() {
		return fmt.Errorf("%w: %s tensor has %d bytes, want %d", ErrBuffer, f.Kind(), len(enc), l.Size())
	}
	if r0 < 0 || n < 0 || r0 > m.Rows || n > m.Rows-r0 {
		return fmt.Errorf("%w: rows %d..%d+%d outside 0..%d", ErrBuffer, r0, r0, n, m.Rows)
	}
	if int64(len(dst)) != n*m.K {
		return fmt.Errorf("%w: destination has %d values, %d rows need %d", ErrBuffer, len(dst), n, n*m.K)
	}
	for i := range n {
		r := r0 + i
		off := l.RowOffset(r)
		row := enc[off : off+l.RowBytes]
		out := dst[i*m.K : (i+1)*m.K]
		switch f {
		case Raw:
			toFloat32(dt, row, out)
		case Q8:
			decodeQ8Row(row, out)
		case Q4, Q5, Q6:
			decodeAffineRow(f.Bits(), row, out)
		case NVFP4:
			mat := off - (r%l.MatRows)*l.RowBytes - nvfp4HeaderBytes
			decodeNVFP4Row(nvfp4MatrixScale(enc[mat:]), row, out)
		}
	}
	return nil
}
