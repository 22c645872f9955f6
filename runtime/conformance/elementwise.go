package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// randBits are n random float32 bit patterns: every exponent, NaNs with
// payloads, denormals.
func randBits(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(rng.Uint32())
	}
	return v
}

func testCopy(t T, b, ref backend.Backend) {
	rng := rand.New(rand.NewPCG(13, 14))
	cases := []struct {
		name              string
		srcLen, dstLen    int // dstLen 0: src is dst
		srcOff, dstOff, n int
	}{
		{"one", 1, 1, 0, 0, 1},
		{"odd", 40, 50, 3, 11, 29},
		{"none", 5, 6, 5, 6, 0},
		{"whole", 1000, 1000, 0, 0, 1000},
		{"hidden", 2816 * 3, 2816*4 + 1, 2816, 2817, 2816 * 2},
		{"kv-rows", 2 * 512 * 300, 2 * 512 * 301, 2 * 512 * 37, 2 * 512 * 1, 2 * 512 * 256},
		{"self-later", 100, 0, 0, 57, 40},
		{"self-earlier", 100, 0, 60, 3, 40},
		{"self-adjacent", 64, 0, 0, 32, 32},
		{"self-odd", 2816*2 + 5, 0, 2816 + 5, 1, 2816},
	}
	for _, c := range cases {
		t.Run(c.name, func(t T) {
			src := randBits(rng, c.srcLen)
			copy(src, specials)
			in := [][]float32{src}
			if c.dstLen > 0 {
				in = append(in, randVec(rng, c.dstLen))
			}
			run := func(be backend.Backend) [][]float32 {
				return runOp(t, be, "Copy", in, func(bufs []backend.Buf) error {
					dst := bufs[len(bufs)-1]
					return be.Copy(dst, c.dstOff, bufs[0], c.srcOff, c.n)
				})
			}
			want, got := run(ref), run(b)
			for i := range want {
				buf := []string{"src", "dst"}[i]
				if c.dstLen == 0 {
					buf = "src=dst"
				}
				r := newReport(t, "Copy", fmt.Sprintf("%s (n=%d from %d to %d), %s", c.name, c.n, c.srcOff, c.dstOff, buf))
				r.exactAll(got[i], want[i])
				r.done()
			}
		})
	}
}

func testAddScale(t T, b, ref backend.Backend, o Options) {
	rng := rand.New(rand.NewPCG(15, 16))
	type input struct {
		name string
		x, y []float32
	}
	var ins []input
	for _, n := range []int{1, 7, 1000, 2816 * 7} {
		ins = append(ins, input{fmt.Sprintf("n=%d", n), spreadVec(rng, n, 2), spreadVec(rng, n, 2)})
	}
	// Every pair of specials, and sums that round (x ≫ y).
	var sx, sy []float32
	for _, x := range specials {
		for _, y := range specials {
			sx, sy = append(sx, x), append(sy, y)
		}
	}
	ins = append(ins, input{"specials", sx, sy})
	big, small := randVec(rng, 999), randVec(rng, 999)
	for i := range big {
		big[i] *= 1 << 20
		small[i] *= 0.37
	}
	ins = append(ins, input{"rounding", big, small})
	for _, in := range ins {
		for _, s := range []float32{1, 0.37} {
			name := fmt.Sprintf("%s/s=%g", in.name, s)
			n := len(in.x)
			run := func(be backend.Backend) [][]float32 {
				return runOp(t, be, "AddScale "+name, [][]float32{withTail(in.x, 3), withTail(in.y, 2)}, func(bufs []backend.Buf) error {
					return be.AddScale(bufs[0], bufs[1], n, s)
				})
			}
			want, got := run(ref), run(b)
			r := newReport(t, "AddScale", name)
			r.at = func(i int) string { return fmt.Sprintf("x[%d] (x=%g, y=%g)", i, at(in.x, i), at(in.y, i)) }
			if o.Numerics.FlushSubnormals {
				for i := range want[0] {
					r.exactOr(i, got[0][i], want[0][i], addScaleFlushed(at(in.x, i), at(in.y, i), s, i < n))
				}
			} else {
				r.exactAll(got[0], want[0])
			}
			r.at = func(i int) string { return fmt.Sprintf("y[%d]", i) }
			r.exactAll(got[1], want[1])
			r.done()
		}
	}
}

// flush returns v, or zero of its sign when v is subnormal: what a
// flush-to-zero unit makes of an input or a result.
func flush(v float32) float32 {
	if v != 0 && math.Abs(float64(v)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(v)))
	}
	return v
}

// addScaleFlushed is AddScale's value of x with y and s under flushed
// subnormals (the inputs, the sum and the product flushed); inside false
// (a buffer's tail, which AddScale leaves alone) gives NaN, which no value
// matches bit for bit.
func addScaleFlushed(x, y, s float32, inside bool) float32 {
	if !inside {
		return float32(math.NaN())
	}
	sum := flush(flush(x) + flush(y))
	return flush(sum * flush(s))
}

// temperFlushed is Temper's value of x at temperature T under flushed
// subnormals (inside as addScaleFlushed's).
func temperFlushed(x, T float32, inside bool) float32 {
	if !inside {
		return float32(math.NaN())
	}
	return flush(flush(x) / flush(T))
}

// at is v[i], or NaN past the end (a buffer's tail).
func at(v []float32, i int) float32 {
	if i < len(v) {
		return v[i]
	}
	return float32(math.NaN())
}

// geluRef is PyTorch's tanh GELU in float64.
func geluRef(x float32) float64 {
	v := float64(x)
	return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
}

func testGeluMul(t T, b, ref backend.Backend, tol Tolerances) {
	rng := rand.New(rand.NewPCG(17, 18))
	// Fixed gate values: zero, the tails (large negative x, where 1 + tanh
	// cancels, and large positive) and the knee.
	var fixed []float32
	for x := float32(-10); x <= 10; x += 0.125 {
		fixed = append(fixed, x)
	}
	fixed = append(fixed, 0, float32(math.Copysign(0, -1)), -30, -100, 30, 100, 1e-20, -1e-20, -3.0000002, -2.9999998)
	for _, n := range []int{1, 7, len(fixed), 1000, 704 * 3, 2112 * 5} {
		name := fmt.Sprintf("n=%d", n)
		g := spreadVec(rng, n, 0.7)
		if n == len(fixed) {
			name = "tails"
			copy(g, fixed)
		}
		u := spreadVec(rng, n, 1)
		if n > 7 {
			u[3] = 0
			g[n-1] = -7.5
		}
		run := func(be backend.Backend) [][]float32 {
			return runOp(t, be, "GeluMul "+name, [][]float32{withTail(g, 3), withTail(u, 1)}, func(bufs []backend.Buf) error {
				return be.GeluMul(bufs[0], bufs[1], n)
			})
		}
		want, got := run(ref), run(b)
		r := newReport(t, "GeluMul", name)
		r.at = func(i int) string { return fmt.Sprintf("g[%d] (x=%g, u=%g)", i, g[i], u[i]) }
		for i := range n {
			bound := (GeluMulRel*math.Abs(geluRef(g[i])) + (GeluMulAbs+tol.GeluMul)*math.Abs(float64(g[i]))) * math.Abs(float64(u[i]))
			r.within(i, float64(got[0][i]), float64(want[0][i]), bound)
		}
		r.at = nil
		for i := n; i < len(want[0]); i++ {
			r.exact(i, got[0][i], want[0][i]) // the tail
		}
		r.at = func(i int) string { return fmt.Sprintf("u[%d] (input)", i) }
		r.exactAll(got[1], want[1])
		r.done()
	}
}

func testTemper(t T, b, ref backend.Backend, o Options) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, n := range []int{1, 7, len(specials), 1000, 262144} {
		x := randVec(rng, n)
		for i := range x { // softcapped logits, and a spread beyond them
			x[i] = 30 * float32(math.Tanh(float64(x[i])/3))
			if i%5 == 1 {
				x[i] *= float32(math.Exp(rng.NormFloat64() * 10))
			}
		}
		if n == len(specials) {
			copy(x, specials)
		}
		// The schedule's end points (T(48) and T(1) of the default
		// config), others, and a small T that overflows large logits.
		for _, T := range []float32{1, 0.800000011920929, 0.40833333134651184, 0.7, 2.5, 1e-3} {
			name := fmt.Sprintf("n=%d/T=%.9g", n, T)
			run := func(be backend.Backend) [][]float32 {
				return runOp(t, be, "Temper "+name, [][]float32{withTail(x, 2)}, func(bufs []backend.Buf) error {
					return be.Temper(bufs[0], n, T)
				})
			}
			want, got := run(ref), run(b)
			r := newReport(t, "Temper", name)
			r.at = func(i int) string { return fmt.Sprintf("[%d] (z=%g)", i, at(x, i)) }
			if o.Numerics.FlushSubnormals {
				for i := range want[0] {
					r.exactOr(i, got[0][i], want[0][i], temperFlushed(at(x, i), T, i < n))
				}
			} else {
				r.exactAll(got[0], want[0])
			}
			r.done()
		}
	}
}

func testRoundBF16(t T, b, ref backend.Backend) {
	rng := rand.New(rand.NewPCG(21, 22))
	// Ties (to even, up and down), values just either side of a tie, the
	// largest finite float (rounds to infinity), denormals.
	ties := []float32{
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000),
		math.Float32frombits(0xbf808000), math.Float32frombits(0xbf818000),
		math.Float32frombits(0x3f807fff), math.Float32frombits(0x3f808001),
		math.Float32frombits(0x7f7f8000), math.Float32frombits(0x7f7f7fff),
		math.Float32frombits(0x00008000), math.Float32frombits(0x00018000),
		math.Float32frombits(0x7fc12345), math.Float32frombits(0xff812345), // NaNs
	}
	for _, n := range []int{1, 7, len(specials) + len(ties), 1000, 2816 * 11} {
		for _, kind := range []string{"normal", "bits"} {
			name := fmt.Sprintf("n=%d/%s", n, kind)
			var x []float32
			if kind == "normal" {
				x = spreadVec(rng, n, 3)
			} else {
				x = randBits(rng, n)
			}
			if n == len(specials)+len(ties) {
				copy(x, append(append([]float32(nil), specials...), ties...))
			}
			run := func(be backend.Backend) [][]float32 {
				return runOp(t, be, "RoundBF16 "+name, [][]float32{withTail(x, 2)}, func(bufs []backend.Buf) error {
					return be.RoundBF16(bufs[0], n)
				})
			}
			want, got := run(ref), run(b)
			r := newReport(t, "RoundBF16", name)
			r.at = func(i int) string { return fmt.Sprintf("[%d] (x=%#08x)", i, math.Float32bits(at(x, i))) }
			r.exactAll(got[0], want[0])
			r.done()
		}
	}
}
