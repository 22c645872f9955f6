package cpu

import (
	"math"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
	"github.com/dgq-dev/dgq/runtime/model"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// Every format's bound matrices give products identical to the same sums
// over rows decoded by codecs.DecodeRows: the runtime's band decoding (row
// offsets into expert stacks included) adds nothing.
func TestQuantizedMatmulMatchesDecode(t *testing.T) {
	for _, profile := range []string{"q4", "q5", "nvfp4"} {
		p := fixture.OpenPack(t, "wide", profile)
		w := model.PackWeights(p)
		m, err := model.Bind(w)
		if err != nil {
			t.Fatal(err)
		}
		mats := map[string]*matrix{}
		for _, td := range w.Tensors() {
			if w, err := newMatrix(td); err == nil {
				mats[td.Name] = w
			}
		}
		tc := m.Config().Text
		E, F, H := tc.NumExperts, tc.MoEIntermediateSize, tc.HiddenSize
		l := func(s string) *matrix { return mats["model.decoder.layers.3."+s] }
		q := l("self_attn.q_proj.weight")
		cases := []struct {
			w     *matrix
			r0, n int
		}{
			{l("experts.gate_up_proj"), 5 * 2 * F, 2 * F}, {l("experts.down_proj"), 11 * H, H}, {q, 0, q.rows()},
			{l("self_attn.o_proj.weight"), 0, H}, {mats["model.decoder.self_conditioning.down_proj.weight"], 0, H},
			{l("experts.gate_up_proj"), (E - 1) * 2 * F, 2 * F},
		}
		pl := newPool(0)
		for _, c := range cases {
			k := c.w.cols()
			const T = 3
			x := make([]float64, T*k)
			for i := range x {
				x[i] = float64(float32(math.Sin(float64(i)*0.37) * 2))
			}
			got := make([]float32, T*c.n)
			pl.matmul(c.w, c.r0, c.n, x, T, got, c.n)
			dec := make([]float32, c.n*k)
			if err := codecs.DecodeRows(c.w.f, c.w.dt, c.w.geom, c.w.b, int64(c.r0), int64(c.n), dec); err != nil {
				t.Fatal(err)
			}
			for tt := range T {
				for o := range c.n {
					var s float64
					for i := range k {
						s += x[tt*k+i] * float64(dec[o*k+i])
					}
					if float32(s) != got[tt*c.n+o] {
						t.Fatalf("%s %s row %d: %v, want %v", profile, c.w.name, c.r0+o, got[tt*c.n+o], float32(s))
					}
				}
			}
		}
	}
}
