package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// embedScale is the model's embedding scale √2816 in f32.
var embedScale = float32(math.Sqrt(2816))

func testEmbed(t T, b, ref backend.Backend, o Options) {
	rng := rand.New(rand.NewPCG(23, 24))
	type tableCase struct {
		rows, h int
		fds     []formatDType
	}
	cases := []tableCase{
		{1, 1, formats}, {5, 64, formats}, {37, 96, formats}, {3, 33, formats}, {300, 2816, formats},
		// A tall table: ids past 2¹⁷ and up to the vocabulary's last.
		{262144, 16, []formatDType{{codecs.Raw, codecs.BF16}}},
	}
	tried := map[formatDType]bool{}
	for _, c := range cases {
		if o.skip(c.rows > 1<<16) {
			continue
		}
		src := spreadVec(rng, c.rows*c.h, 1)
		for _, fd := range c.fds {
			if !fd.fits(c.rows, c.h) {
				continue
			}
			tried[fd] = true
			name := fmt.Sprintf("%s/%dx%d", fd, c.rows, c.h)
			t.Run(name, func(t T) {
				td := mustEncode(t, fd, c.rows, c.h, src)
				wr, wb := uploadWeight(t, ref, td), uploadWeight(t, b, td)
				n := min(9, 2*c.rows+1)
				ids := make([]float32, n)
				for i := range ids {
					ids[i] = float32(rng.IntN(c.rows))
				}
				ids[0], ids[n-1] = 0, float32(c.rows-1)
				if n > 3 {
					ids[2] = ids[1] // a repeated id
				}
				if c.rows > 1<<17 {
					ids[1] = 1 << 17
				}
				for _, scale := range []float32{1, embedScale, -0.37} {
					sub := fmt.Sprintf("%s/scale=%g", name, scale)
					for _, rows := range []int{1, n} {
						run := func(be backend.Backend, w backend.Weight) [][]float32 {
							out := withTail(make([]float32, rows*c.h), 5)
							return runOp(t, be, "Embed "+sub, [][]float32{out, withTail(ids, 1)}, func(bufs []backend.Buf) error {
								return be.Embed(bufs[0], w, bufs[1], rows, scale)
							})
						}
						want, got := run(ref, wr), run(b, wb)
						r := newReport(t, "Embed", fmt.Sprintf("%s/rows=%d", sub, rows))
						r.at = func(i int) string {
							if i >= rows*c.h {
								return fmt.Sprintf("out[%d] (past the rows)", i)
							}
							return fmt.Sprintf("out[%d][%d] (id %g)", i/c.h, i%c.h, ids[i/c.h])
						}
						r.exactAll(got[0], want[0])
						r.at = nil
						r.exactAll(got[1], want[1])
						r.done()
					}
				}
			})
		}
	}
	for _, fd := range formats {
		if !tried[fd] {
			t.Errorf("Embed: format %s was not exercised", fd)
		}
	}
}

// softmax64 is softmax(z) in float64.
func softmax64(z []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, float64(v))
	}
	p := make([]float64, len(z))
	var s float64
	for i, v := range z {
		p[i] = math.Exp(float64(v) - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

func testSoftEmbed(t T, b, ref backend.Backend, tol Tolerances) {
	rng := rand.New(rand.NewPCG(25, 26))
	cases := []struct {
		v, h, rows int
		scale      float32
	}{
		{4096, 64, 3, embedScale},
		{257, 33, 2, 1},
		{1, 32, 2, 0.5}, // one row of the table: p = 1
	}
	for _, c := range cases {
		src := spreadVec(rng, c.v*c.h, 0.5)
		for _, fd := range []formatDType{{codecs.Raw, codecs.BF16}, {codecs.Q8, codecs.BF16}} {
			if !fd.fits(c.v, c.h) {
				t.Fatalf("SoftEmbed: %s does not fit %d×%d", fd, c.v, c.h)
			}
			name := fmt.Sprintf("%s/V=%d/H=%d/rows=%d", fd, c.v, c.h, c.rows)
			t.Run(name, func(t T) {
				td := mustEncode(t, fd, c.v, c.h, src)
				wr, wb := uploadWeight(t, ref, td), uploadWeight(t, b, td)
				table := dequantRef(t, ref, wr)
				// Logits over a wide range: near-flat, spread, peaked (a
				// few large ones), and finite only.
				z := make([]float32, c.rows*c.v)
				for r := range c.rows {
					row := z[r*c.v : (r+1)*c.v]
					sd := []float64{0.3, 4, 15}[r%3]
					for i := range row {
						row[i] = float32(rng.NormFloat64() * sd)
					}
					if r == 1 && c.v > 3 {
						row[c.v-1], row[c.v/2] = 80, 79.5
					}
					row[0] = -1e4 // a weight that underflows
				}
				run := func(be backend.Backend, w backend.Weight) [][]float32 {
					out := withTail(make([]float32, c.rows*c.h), 4)
					return runOp(t, be, "SoftEmbed "+name, [][]float32{out, withTail(z, 3)}, func(bufs []backend.Buf) error {
						return be.SoftEmbed(bufs[0], bufs[1], c.rows, w, c.scale)
					})
				}
				want, got := run(ref, wr), run(b, wb)
				r := newReport(t, "SoftEmbed", name)
				r.at = func(i int) string { return fmt.Sprintf("out[%d][%d]", i/c.h, i%c.h) }
				for row := range c.rows {
					p := softmax64(z[row*c.v : (row+1)*c.v])
					mag := make([]float64, c.h)
					for v, pv := range p {
						for i, x := range table[v*c.h : (v+1)*c.h] {
							mag[i] += pv * math.Abs(float64(x))
						}
					}
					for i := range c.h {
						bound := (SoftEmbedRel+SoftmaxRel+tol.Softmax)*math.Abs(float64(c.scale))*mag[i] + tol.SubnormalAbs
						k := row*c.h + i
						r.within(k, float64(got[0][k]), float64(want[0][k]), bound)
					}
				}
				r.at = nil
				for i := c.rows * c.h; i < len(want[0]); i++ {
					r.exact(i, got[0][i], want[0][i])
				}
				r.exactAll(got[1], want[1]) // logits unchanged
				r.done()
			})
		}
	}
}
