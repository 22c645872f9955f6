package codecs_test

import (
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

// BenchmarkEncode encodes the 1408×2816 bf16 matrix on one goroutine.
// MB/s is bf16 input bytes; elements/s = MB/s / 2.
func BenchmarkEncode(b *testing.B) {
	m := codecs.Matrix{Rows: benchRows, K: benchK}
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		for _, f := range codecs.Formats() {
			b.Run(f.String()+"/"+string(d), func(b *testing.B) {
				enc, dst := newBenchEncoder(b, f, m)
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if enc.NeedsScan() {
						amax, err := enc.ScanRows(src)
						if err != nil {
							b.Fatal(err)
						}
						enc.SetAmax(amax)
					}
					if _, err := enc.EncodeRows(dst, src, 0, m.Rows); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(m.Elements())*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
	}
}

// BenchmarkDecode decodes the whole encoded matrix with DecodeRows.
func BenchmarkDecode(b *testing.B) {
	m := codecs.Matrix{Rows: benchRows, K: benchK}
	out := make([]float32, m.Elements())
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		for _, f := range codecs.Formats() {
			_, enc := encodeAll(b, f, m, src)
			b.Run(f.String()+"/"+string(d), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if err := codecs.DecodeRows(f, codecs.BF16, m, enc, 0, m.Rows, out); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(m.Elements())*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
	}
}

// newBenchEncoder returns an encoder and destination planes for m.
func newBenchEncoder(b *testing.B, f codecs.Format, m codecs.Matrix) (*codecs.Encoder, [][]byte) {
	enc, err := codecs.NewEncoder(f, codecs.BF16, m)
	if err != nil {
		b.Fatal(err)
	}
	var dst [][]byte
	for _, p := range enc.Planes() {
		dst = append(dst, make([]byte, p.Size))
	}
	return enc, dst
}
