package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// moeCases are MoE's shapes: small odd ones and the model's widths (H 2816,
// F 704; 8 of its 128 experts).
var moeCases = []struct {
	e, k, h, f, rows int
}{
	{4, 2, 32, 16, 5},
	{16, 4, 96, 40, 33},
	{8, 2, 2816, 704, 3},
}

// fastVec is n values of mean 0 and standard deviation sd, cheaply (four
// uniform 16-bit draws from each random word): for the large weights.
func fastVec(rng *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	step := float32(sd * math.Sqrt(3) / (1 << 15)) // uniform in [−√3·sd, √3·sd)
	for i := 0; i < n; i += 4 {
		x := rng.Uint64()
		for j := i; j < min(i+4, n); j++ {
			v[j] = (float32(x&0xffff) - (1 << 15) + 0.5) * step
			x >>= 16
		}
	}
	return v
}

// uniformVec is n values uniform in [lo, hi).
func uniformVec(rng *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return v
}

func testMoE(t T, b, ref backend.Backend, o Options) {
	rng := rand.New(rand.NewPCG(29, 30))
	bf16 := formatDType{codecs.Raw, codecs.BF16}
	q4 := formatDType{codecs.Q4, codecs.BF16}
	for _, c := range moeCases {
		E, K, H, F, rows := c.e, c.k, c.h, c.f, c.rows
		if o.skip(H >= 2816) { // the model's widths
			continue
		}
		// Gate/up pre-activations of a few units (gelu's knee and both
		// tails), outputs of about one.
		gateUp := fastVec(rng, E*2*F*H, 2/math.Sqrt(float64(H)))
		down := fastVec(rng, E*H*F, 1/math.Sqrt(float64(F)))
		router := randVec(rng, E*H)
		routerScale := uniformVec(rng, H, 0.5, 2)
		perExpert := uniformVec(rng, E, 0.3, 3)
		x := spreadVec(rng, rows*H, 1) // the raw residual
		u := randVec(rng, rows*H)      // the normed input
		const eps = 1e-6
		root := float32(1 / math.Sqrt(float64(H)))

		// The router's probabilities on the host, from the reference's own
		// RMSNorm and MatMulNT: rows where the K-th and (K+1)-th are within
		// RouterGap are not compared.
		rtd := mustEncode(t, bf16, E, H, router)
		rref := uploadWeight(t, ref, rtd)
		near := make([]bool, rows)
		{
			normed := runOp(t, ref, "RMSNorm", [][]float32{x, make([]float32, rows*H)}, func(bufs []backend.Buf) error {
				return ref.RMSNorm(bufs[1], bufs[0], nil, rows, H, eps)
			})[1]
			for i := range normed {
				normed[i] = (normed[i] * routerScale[i%H]) * root
			}
			logits := runOp(t, ref, "MatMulNT", [][]float32{normed, make([]float32, rows*E)}, func(bufs []backend.Buf) error {
				return ref.MatMulNT(bufs[1], bufs[0], rref, rows)
			})[1]
			for r := range rows {
				p := softmax64(logits[r*E : (r+1)*E])
				slices.Sort(p)
				slices.Reverse(p)
				near[r] = K < E && p[K-1]-p[K] < RouterGap
			}
		}

		downFmt := q4
		if !q4.fits(E*H, F) {
			downFmt = bf16 // F not a multiple of q4's group
		}
		for _, wf := range [][2]formatDType{{bf16, bf16}, {q4, downFmt}} {
			name := fmt.Sprintf("E=%d/K=%d/H=%d/F=%d/rows=%d/gate_up=%s/down=%s", E, K, H, F, rows, wf[0], wf[1])
			t.Run(name, func(t T) {
				gtd := mustEncode(t, wf[0], E*2*F, H, gateUp)
				dtd := mustEncode(t, wf[1], E*H, F, down)
				run := func(be backend.Backend, rw backend.Weight) [][]float32 {
					g, d := uploadWeight(t, be, gtd), uploadWeight(t, be, dtd)
					out := withTail(make([]float32, rows*H), 3)
					return runOp(t, be, "MoE "+name, [][]float32{out, u, x, routerScale, perExpert}, func(bufs []backend.Buf) error {
						return be.MoE(bufs[0], bufs[1], bufs[2], rows, backend.MoEWeights{
							Router: rw, RouterScale: bufs[3], PerExpertScale: bufs[4],
							RouterRoot: root, Eps: eps, GateUp: g, Down: d, TopK: K,
						})
					})
				}
				want := run(ref, rref)
				got := run(b, uploadWeight(t, b, rtd))
				r := newReport(t, "MoE", name)
				r.at = func(i int) string { return fmt.Sprintf("out[%d][%d]", i/H, i%H) }
				skipped := 0
				for row := range rows {
					if near[row] {
						skipped++
						continue
					}
					var m float64
					for _, v := range want[0][row*H : (row+1)*H] {
						m = max(m, math.Abs(float64(v)))
					}
					bound := MoERel*m + MoEAbs
					for i := row * H; i < (row+1)*H; i++ {
						r.within(i, float64(got[0][i]), float64(want[0][i]), bound)
					}
				}
				if skipped > 0 {
					t.Logf("MoE %s: %d of %d rows near a router tie, not compared", name, skipped, rows)
				}
				if skipped == rows {
					t.Errorf("MoE %s: every row is near a router tie", name)
				}
				r.at = nil
				for i := rows * H; i < len(want[0]); i++ {
					r.exact(i, got[0][i], want[0][i])
				}
				for j := 1; j < len(want); j++ { // inputs unchanged
					r.exactAll(got[j], want[j])
				}
				r.done()
			})
		}
	}
}
