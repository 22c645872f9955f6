package codecs_test

import (
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

var methods = []codecs.Method{codecs.Search, codecs.MinMax}

// reportElems reports elements per second (b.SetBytes gives MB/s of bf16
// input, i.e. 2 bytes per element).
func reportElems(b *testing.B, m codecs.Matrix) {
	b.ReportMetric(float64(m.Elements())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
}

// BenchmarkEncodeTensor encodes the 1408×2816 bf16 acceptance matrix with
// EncodeTensor (scan included where the method needs one, output buffer
// allocated) on one goroutine, per format, method and distribution.
func BenchmarkEncodeTensor(b *testing.B) {
	m := codecs.Matrix{Rows: accRows, K: accK}
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		for _, f := range codecs.Formats() {
			for _, method := range methods {
				b.Run(f.String()+"/"+method.String()+"/"+string(d), func(b *testing.B) {
					b.SetBytes(int64(len(src)))
					for b.Loop() {
						if _, _, err := codecs.EncodeTensor(f, codecs.BF16, m, method, src); err != nil {
							b.Fatal(err)
						}
					}
					reportElems(b, m)
				})
			}
		}
	}
}

// BenchmarkDecodeRows decodes the whole encoded acceptance matrix with the
// reference decoder.
func BenchmarkDecodeRows(b *testing.B) {
	m := codecs.Matrix{Rows: accRows, K: accK}
	out := make([]float32, m.Elements())
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		for _, f := range codecs.Formats() {
			enc, _, err := codecs.EncodeTensor(f, codecs.BF16, m, codecs.Search, src)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(f.String()+"/"+string(d), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if err := codecs.DecodeRows(f, codecs.BF16, m, enc, 0, m.Rows, out); err != nil {
						b.Fatal(err)
					}
				}
				reportElems(b, m)
			})
		}
	}
}
