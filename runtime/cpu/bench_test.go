package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// Real dimensions of google/diffusiongemma-26B-A4B-it.
const (
	realH      = 2816
	realF      = 704
	realI      = 2112
	realActive = 8  // experts a token uses (of 128)
	realTokens = 16 // tokens per expert in a 256-canvas step on average (256·8/128)
)

// randomMatrix encodes a random bf16 tensor of the given shape in format f
// with codecs.NewEncoder (values N(0, 1/√K), like a trained linear layer).
func randomMatrix(b *testing.B, name string, f codecs.Format, shape ...int64) *matrix {
	b.Helper()
	g, err := codecs.FlattenShape(shape)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(len(name)), uint64(g.Rows)))
	src := make([]byte, 2*g.Elements())
	sd := 1 / math.Sqrt(float64(g.K))
	for i := range g.Elements() {
		binary.LittleEndian.PutUint16(src[2*i:], codecs.Float32ToBF16(float32(r.NormFloat64()*sd)))
	}
	out, _, err := codecs.EncodeTensor(f, codecs.BF16, g, codecs.Search, src)
	if err != nil {
		b.Fatal(err)
	}
	w, err := newMatrix(backend.TensorData{Name: name, Format: f, DType: codecs.BF16, Shape: shape, Bytes: out})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkLayerRealDims is one layer's expert and dense MLP products at
// the real dimensions, per stored format: 16 tokens through the dense MLP
// (gate, up: [2112, 2816]; down: [2816, 2112]) and through 8 experts
// (gate_up: [1408, 2816]; down: [2816, 704] each; only the 8 active experts
// of the 128 are stored here, which changes nothing for the products). The
// GFLOP/s metric counts 2 flops per multiply-add.
func BenchmarkLayerRealDims(b *testing.B) {
	for _, f := range []codecs.Format{codecs.Raw, codecs.Q8, codecs.Q6, codecs.Q5, codecs.Q4, codecs.NVFP4} {
		b.Run(f.String(), func(b *testing.B) {
			p := newPool(0)
			gateUp := randomMatrix(b, "gate_up", f, realActive, 2*realF, realH)
			down := randomMatrix(b, "down", f, realActive, realH, realF)
			gate := randomMatrix(b, "gate", f, realI, realH)
			up := randomMatrix(b, "up", f, realI, realH)
			ddown := randomMatrix(b, "ddown", f, realH, realI)
			T := realTokens
			x := make([]float64, T*realH)
			for i := range x {
				x[i] = float64(float32(math.Sin(float64(i))))
			}
			z := make([]float64, T*max(realF, realI))
			for i := range z {
				z[i] = float64(float32(math.Cos(float64(i))))
			}
			yGU := make([]float32, realActive*T*2*realF)
			yD := make([]float32, realActive*T*realH)
			yG := make([]float32, T*realI)
			yU := make([]float32, T*realI)
			yDD := make([]float32, T*realH)
			var first, second []mmJob
			first = append(first, mmJob{w: gate, n: realI, x: x, T: T, y: yG, ldy: realI},
				mmJob{w: up, n: realI, x: x, T: T, y: yU, ldy: realI})
			second = append(second, mmJob{w: ddown, n: realH, x: z, T: T, y: yDD, ldy: realH})
			for e := range realActive {
				first = append(first, mmJob{w: gateUp, r0: e * 2 * realF, n: 2 * realF, x: x, T: T, y: yGU[e*T*2*realF:], ldy: 2 * realF})
				second = append(second, mmJob{w: down, r0: e * realH, n: realH, x: z, T: T, y: yD[e*T*realH:], ldy: realH})
			}
			macs := float64(T) * (3*realI*realH + realActive*(2*realF*realH+realH*realF))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p.matmuls(first)
				p.matmuls(second)
			}
			b.ReportMetric(2*macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
