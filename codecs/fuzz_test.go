package codecs

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// fuzzShape derives a small shape for f from fuzz bytes: rows per matrix
// from rb (at least minRows), K valid for f from kb, an expert stack of 2
// or 3 matrices when eb says so.
func fuzzShape(f Format, eb, rb, kb uint8, minRows int64) []int64 {
	n := max(int64(rb%6), minRows)
	var k int64
	switch f {
	case Q4, Q5, Q6:
		k = int64(kb%4+1) * 32
	case NVFP4:
		k = int64(kb%8+1) * 16
	case Q8:
		k = int64(kb%70) + 1
	default:
		k = int64(kb % 40)
	}
	if e := int64(eb % 4); e > 1 {
		return []int64{e, n, k}
	}
	return []int64{n, k}
}

// fill repeats data over n bytes, varying the copies so that blocks differ.
func fill(n int, data []byte) []byte {
	out := make([]byte, n)
	if len(data) == 0 {
		return out
	}
	for i := 0; i < n; i += len(data) {
		copy(out[i:], data)
		out[i] ^= byte(i / len(data))
	}
	return out
}

// FuzzDecode: any bytes of the right length decode without a panic or an
// error in every format; decoding is deterministic, a row range decodes to
// the same values as the whole tensor, raw decodes to the source values,
// and changing one byte changes only the rows whose bytes hold it (all the
// rows of a matrix for an nvfp4 matrix scale).
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(0), uint8(2), uint8(1), []byte{1, 2, 3})
	f.Add(uint8(1), uint8(1), uint8(0), uint8(3), uint8(0), []byte{0xff, 0x7f, 0x7c, 0x00, 0x80})
	f.Add(uint8(2), uint8(2), uint8(2), uint8(4), uint8(3), []byte{0x80, 0x7f, 0xff, 0xff, 0x00})
	f.Add(uint8(3), uint8(0), uint8(3), uint8(5), uint8(2), []byte{0x7f, 0x80, 0x00, 0x01})
	f.Add(uint8(4), uint8(1), uint8(2), uint8(1), uint8(1), []byte{0x00, 0x3c, 0x00, 0xbc})
	f.Add(uint8(5), uint8(2), uint8(3), uint8(3), uint8(7), []byte{0x00, 0x00, 0x80, 0x3f, 0x7f, 0x7e, 0xfe, 0xff})
	f.Add(uint8(5), uint8(0), uint8(0), uint8(0), uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, fb, db, eb, rb, kb uint8, data []byte) {
		format := Formats()[int(fb)%len(Formats())]
		dt := allDTypes[int(db)%len(allDTypes)]
		m, err := FlattenShape(fuzzShape(format, eb, rb, kb, 0))
		if err != nil {
			t.Fatal(err)
		}
		l, err := format.Layout(dt, m)
		if err != nil {
			t.Fatal(err)
		}
		enc := fill(int(l.Size()), data)
		all := make([]float32, m.Elements())
		if err := DecodeRows(format, dt, m, enc, 0, m.Rows, all); err != nil {
			t.Fatal(err)
		}
		again := make([]float32, m.Elements())
		if err := DecodeRows(format, dt, m, enc, 0, m.Rows, again); err != nil {
			t.Fatal(err)
		}
		for i := range all {
			if math.Float32bits(all[i]) != math.Float32bits(again[i]) {
				t.Fatalf("element %d decodes to %#x then %#x", i, math.Float32bits(all[i]), math.Float32bits(again[i]))
			}
		}
		r0 := int64(kb) % (m.Rows + 1)
		part := make([]float32, (m.Rows-r0)*m.K)
		if err := DecodeRows(format, dt, m, enc, r0, m.Rows-r0, part); err != nil {
			t.Fatal(err)
		}
		for i, v := range part {
			if math.Float32bits(v) != math.Float32bits(all[r0*m.K+int64(i)]) {
				t.Fatalf("rows %d..: element %d differs from the whole decode", r0, i)
			}
		}
		if format == Raw {
			want := make([]float32, m.Elements())
			toFloat32(dt, enc, want)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(all[i]) {
					t.Fatalf("raw element %d: %#x, want %#x", i, math.Float32bits(all[i]), math.Float32bits(want[i]))
				}
			}
		}
		if len(enc) == 0 {
			return
		}
		// Locality: flip byte p and decode again.
		p := int64(int(fb)*7919+int(rb)*31+len(data)) % int64(len(enc))
		enc[p] ^= 0x5a
		changed := make([]float32, m.Elements())
		if err := DecodeRows(format, dt, m, enc, 0, m.Rows, changed); err != nil {
			t.Fatal(err)
		}
		for r := range m.Rows {
			off := l.RowOffset(r)
			holds := p >= off && p < off+l.RowBytes
			if l.HeaderBytes > 0 {
				mat := r / l.MatRows * (l.HeaderBytes + l.MatRows*l.RowBytes)
				holds = holds || p >= mat && p < mat+l.HeaderBytes
			}
			if holds {
				continue
			}
			for j := r * m.K; j < (r+1)*m.K; j++ {
				if math.Float32bits(changed[j]) != math.Float32bits(all[j]) {
					t.Fatalf("byte %d changed row %d, whose bytes are [%d, %d)", p, r, off, off+l.RowBytes)
				}
			}
		}
	})
}

// finiteBF16 fills n bf16 elements from data and makes every NaN or
// infinity finite by clearing the lowest exponent bit.
func finiteBF16(n int, data []byte) []byte {
	src := fill(2*n, data)
	for i := 0; i < len(src); i += 2 {
		if v := binary.LittleEndian.Uint16(src[i:]); v&0x7f80 == 0x7f80 {
			binary.LittleEndian.PutUint16(src[i:], v&^0x0080)
		}
	}
	return src
}

// FuzzEncodeDecode: any finite bf16 source encodes with both methods in
// every format; the result passes checkRoundTrip (statistics equal to the
// decode's, the derived error bounds, no NaN: for MinMax except q4/q5/q6
// groups whose float32 range overflows, where the engine's own encoder
// stores an infinite delta); encoding in two chunks gives the same bytes.
func FuzzEncodeDecode(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(2), uint8(1), uint16(1), []byte{0x80, 0x3f, 0, 0x40, 0x12, 0xb9})
	f.Add(uint8(1), uint8(0), uint8(3), uint8(9), uint16(2), []byte{0x23, 0x3c, 0x11, 0xbc, 0x80, 0x00, 0x01, 0x80})
	f.Add(uint8(2), uint8(2), uint8(4), uint8(3), uint16(5), []byte{0xa3, 0x3c, 0x01, 0xbd, 0x44, 0x3a, 0xf0, 0xba})
	f.Add(uint8(3), uint8(0), uint8(1), uint8(2), uint16(0), []byte{0x00, 0x00, 0x00, 0x80})
	f.Add(uint8(4), uint8(3), uint8(2), uint8(0), uint16(3), []byte{0x10, 0x47, 0x20, 0xc6, 0x7f, 0x00})
	f.Add(uint8(5), uint8(2), uint8(3), uint8(5), uint16(4), []byte{0x80, 0x3f, 0x00, 0xc0, 0x40, 0x3e, 0x00, 0x00})
	f.Add(uint8(5), uint8(3), uint8(5), uint8(7), uint16(7), []byte{0x01, 0x00, 0x02, 0x80, 0x7f, 0x00})
	f.Add(uint8(2), uint8(0), uint8(2), uint8(1), uint16(1), []byte{0x7f, 0x7f, 0x00, 0x3f})
	f.Fuzz(func(t *testing.T, fb, eb, rb, kb uint8, split uint16, data []byte) {
		format := Formats()[int(fb)%len(Formats())]
		shape := fuzzShape(format, eb, rb, kb, 1)
		if err := format.CheckDims(shape); err != nil {
			t.Fatal(err)
		}
		m, _ := FlattenShape(shape)
		src := finiteBF16(int(m.Elements()), data)
		for _, method := range allMethods {
			enc, st, err := EncodeTensor(format, BF16, m, method, src)
			if method == MinMax && errors.Is(err, ErrRange) {
				continue // the engine's step overflows: refused, never written (TestMinMaxRefusesOverflow)
			}
			if err != nil {
				t.Fatalf("%s %s %v: %v", format, method, shape, err)
			}
			checkRoundTrip(t, format.String()+"/"+method.String(), format, method, BF16, m, src, enc, st)
			at := int64(split) % (m.Rows + 1)
			got, _, err := encodeChunked(format, BF16, m, method, src, []int64{0, at, m.Rows}, false)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(enc) {
				t.Fatalf("%s %s %v: encoding split at row %d differs from EncodeTensor", format, method, shape, at)
			}
		}
	})
}
