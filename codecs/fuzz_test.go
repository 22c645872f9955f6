package codecs

import (
	"errors"
	"math"
	"testing"
)

// fuzzGeometry derives a small valid geometry from fuzz bytes.
func fuzzGeometry(fb, db, rb, kb uint8) (Format, DType, Matrix) {
	fs := Formats()
	return fs[int(fb)%len(fs)], allDTypes[int(db)%len(allDTypes)], Matrix{Rows: int64(rb % 5), K: int64(kb%4+1) * 32}
}

// FuzzDecodeRows: any bytes of the right length decode without a panic or
// an error, and row-by-row decoding equals the whole decode.
func FuzzDecodeRows(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(2), uint8(1), []byte{1, 2, 3})
	f.Add(uint8(2), uint8(1), uint8(3), uint8(0), []byte{0xff, 0x7f, 0x7c, 0x00, 0x80})
	f.Add(uint8(5), uint8(2), uint8(4), uint8(3), []byte{0x7f, 0xff, 0xfe, 0x7e, 0x00})
	f.Add(uint8(1), uint8(0), uint8(1), uint8(2), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, fb, db, rb, kb uint8, data []byte) {
		format, dt, m := fuzzGeometry(fb, db, rb, kb)
		size, err := format.EncodedSize(dt, m)
		if err != nil {
			t.Fatal(err)
		}
		enc := make([]byte, size)
		for i := 0; len(data) > 0 && i < len(enc); i += len(data) {
			copy(enc[i:], data)
		}
		all := make([]float32, m.Elements())
		if err := DecodeRows(format, dt, m, enc, 0, m.Rows, all); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, m.K)
		for r := range m.Rows {
			if err := DecodeRows(format, dt, m, enc, r, 1, row); err != nil {
				t.Fatal(err)
			}
			for i, v := range row {
				if math.Float32bits(v) != math.Float32bits(all[r*m.K+int64(i)]) {
					t.Fatalf("row %d col %d differs", r, i)
				}
			}
		}
	})
}

// FuzzEncodeRows: any source bytes either fail with ErrNonFinite (exactly
// when they hold a NaN/Inf) or encode to finite values whose statistics
// match an independent decode.
func FuzzEncodeRows(f *testing.F) {
	f.Add(uint8(2), uint8(0), uint8(1), uint8(0), []byte{0x80, 0x3f, 0, 0x40})
	f.Add(uint8(5), uint8(2), uint8(2), uint8(1), []byte{0xff, 0xff, 0x7f, 0x7f})
	f.Add(uint8(3), uint8(1), uint8(3), uint8(2), []byte{0x00, 0x7c})
	f.Fuzz(func(t *testing.T, fb, db, rb, kb uint8, data []byte) {
		format, dt, m := fuzzGeometry(fb, db, rb, kb)
		src := make([]byte, m.Elements()*int64(dt.Size()))
		for i := 0; len(data) > 0 && i < len(src); i += len(data) {
			copy(src[i:], data)
		}
		e, err := NewEncoder(format, dt, m)
		if err != nil {
			t.Fatal(err)
		}
		amax, scanErr := e.ScanRows(src)
		e.SetAmax(amax)
		dst := planeBuffers(e, m.Rows)
		st, err := e.EncodeRows(dst, src, 0, m.Rows)
		if finite := CheckFinite(dt, src) == nil; !finite {
			if !errors.Is(err, ErrNonFinite) || !errors.Is(scanErr, ErrNonFinite) {
				t.Fatalf("non-finite source: encode %v, scan %v", err, scanErr)
			}
			return
		}
		if err != nil || scanErr != nil {
			t.Fatal(err, scanErr)
		}
		size, _ := format.EncodedSize(dt, m)
		enc := make([]byte, size)
		for i, p := range e.planes {
			if p.RowBytes == 0 {
				copy(enc[p.Offset:], e.TensorPlane(i))
			} else {
				copy(enc[p.Offset:], dst[i])
			}
		}
		got, dec := decodeStats(t, format, dt, m, enc, src)
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: element %d decodes to %g", format, i, v)
			}
		}
		if st.N != got.N || st.MaxAbsErr != got.MaxAbsErr || !closeRel(st.SumSqErr, got.SumSqErr) || !closeRel(st.SumSqRef, got.SumSqRef) {
			t.Fatalf("stats %+v, decode %+v", st, got)
		}
	})
}
