package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// attnCases are Attention's shapes: the model's (16 query heads over 8 KV
// heads of 256 on sliding layers, over 2 of 512 on full ones) and small odd
// ones, bidirectional (the decoder over a prefix and the canvas) and causal
// (the encoder, in chunks after a prefix, with and without a window), GQA
// groups 1, 2, 4 and 8. Queries ≤ 70 and keys ≤ 300 keep the float64
// reference fast. sigma is the spread of the scores (larger: peakier).
var attnCases = []struct {
	name  string
	a     backend.AttentionShape
	sigma float64
}{
	{"bidi/sliding-model", backend.AttentionShape{Rows: 32, Heads: 16, KVHeads: 8, HeadDim: 256, KeyStart: 0, KeyEnd: 300}, 3},
	{"bidi/full-model-after-cache", backend.AttentionShape{Rows: 19, Heads: 16, KVHeads: 2, HeadDim: 512, KeyStart: 45, KeyEnd: 240}, 3},
	{"bidi/one-key", backend.AttentionShape{Rows: 1, Heads: 4, KVHeads: 4, HeadDim: 8, KeyStart: 3, KeyEnd: 4}, 3},
	{"bidi/group4-peaked", backend.AttentionShape{Rows: 7, Heads: 8, KVHeads: 2, HeadDim: 16, KeyStart: 1, KeyEnd: 77}, 25},
	{"bidi/one-query", backend.AttentionShape{Rows: 1, Heads: 16, KVHeads: 2, HeadDim: 512, KeyStart: 0, KeyEnd: 257}, 3},
	{"causal/prefill", backend.AttentionShape{Rows: 70, Heads: 4, KVHeads: 1, HeadDim: 16, Causal: true}, 3},
	{"causal/chunk-after-prefix", backend.AttentionShape{Rows: 50, Heads: 8, KVHeads: 8, HeadDim: 256, Causal: true, QueryPos: 200}, 3},
	{"causal/sliding-model", backend.AttentionShape{Rows: 70, Heads: 16, KVHeads: 8, HeadDim: 256, Causal: true, QueryPos: 230, Window: 24}, 3},
	{"causal/sliding-cache-start", backend.AttentionShape{Rows: 40, Heads: 16, KVHeads: 2, HeadDim: 512, Causal: true, KeyStart: 120, QueryPos: 150, Window: 64}, 3},
	{"causal/sliding-one-row", backend.AttentionShape{Rows: 1, Heads: 16, KVHeads: 2, HeadDim: 512, Causal: true, KeyStart: 172, QueryPos: 299, Window: 128}, 8},
	{"causal/window-1", backend.AttentionShape{Rows: 5, Heads: 2, KVHeads: 1, HeadDim: 8, Causal: true, QueryPos: 3, Window: 1}, 3},
	{"causal/window-2-peaked", backend.AttentionShape{Rows: 9, Heads: 8, KVHeads: 1, HeadDim: 16, Causal: true, KeyStart: 2, QueryPos: 11, Window: 2}, 25},
}

// visible is the key range [lo, hi) query t sees (backend.AttentionShape).
func visible(a backend.AttentionShape, t int) (lo, hi int) {
	lo, hi = a.KeyStart, a.KeyEnd
	if a.Causal {
		p := a.QueryPos + t
		hi = p + 1
		if a.Window > 0 {
			lo = max(lo, p-a.Window+1)
		}
	}
	return lo, hi
}

func testAttention(t T, b, ref backend.Backend, o Options, tol Tolerances) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, c := range attnCases {
		if o.skip(c.a.Heads >= 16 && c.a.HeadDim >= 256) { // the model's heads
			continue
		}
		t.Run(c.name, func(t T) {
			a := c.a
			hd := a.HeadDim
			qw, kw := a.Heads*hd, a.KVHeads*hd
			end := a.KeyEnd
			if a.Causal {
				end = a.QueryPos + a.Rows
			}
			q := randVec(rng, a.Rows*qw)
			for i := range q {
				q[i] *= float32(c.sigma / math.Sqrt(float64(hd)))
			}
			k, v := randVec(rng, end*kw), randVec(rng, end*kw)
			// Key rows before KeyStart are no query's: large values that
			// would dominate any output they leaked into.
			for i := range a.KeyStart * kw {
				k[i] *= 1e3
				v[i] = 1e4
			}
			run := func(be backend.Backend) [][]float32 {
				out := withTail(make([]float32, a.Rows*qw), 3)
				return runOp(t, be, "Attention "+c.name, [][]float32{out, q, k, v}, func(bufs []backend.Buf) error {
					return be.Attention(bufs[0], bufs[1], bufs[2], bufs[3], a)
				})
			}
			want, got := run(ref), run(b)
			r := newReport(t, "Attention", fmt.Sprintf("%s %+v", c.name, a))
			r.at = func(i int) string { return fmt.Sprintf("out[%d][head %d][%d]", i/qw, i%qw/hd, i%hd) }
			// |k| in float64, and the largest |value| of each key row and KV
			// head.
			ak := make([]float64, len(k))
			for i, x := range k {
				ak[i] = math.Abs(float64(x))
			}
			vrow := make([]float64, end*a.KVHeads)
			for i, x := range v {
				vrow[i/hd] = max(vrow[i/hd], math.Abs(float64(x)))
			}
			group := a.Heads / a.KVHeads
			aq := make([]float64, hd)
			for tq := range a.Rows {
				lo, hi := visible(a, tq)
				for h := range a.Heads {
					g := (h / group) * hd
					for d, x := range q[tq*qw+h*hd : tq*qw+(h+1)*hd] {
						aq[d] = math.Abs(float64(x))
					}
					var smax, vmax float64
					for j := lo; j < hi; j++ {
						var s float64
						for d, x := range ak[j*kw+g : j*kw+g+hd] {
							s += aq[d] * x
						}
						smax = max(smax, s)
						vmax = max(vmax, vrow[j*a.KVHeads+h/group])
					}
					bound := (AttentionRel*(1+smax)+tol.Attention)*vmax + tol.SubnormalAbs
					for d := range hd {
						i := tq*qw + h*hd + d
						r.within(i, float64(got[0][i]), float64(want[0][i]), bound)
					}
				}
			}
			r.at = nil
			for i := a.Rows * qw; i < len(want[0]); i++ {
				r.exact(i, got[0][i], want[0][i])
			}
			for j := 1; j < 4; j++ { // inputs unchanged
				r.exactAll(got[j], want[j])
			}
			r.done()
		})
	}
}
