package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// probeCases are the inputs of ProbeArithmetic: random products over a
// wide range of exponents (a few subnormal), c the negated rounded product.
func probeCases(n int) (a, b, c []float32) {
	rng := rand.New(rand.NewPCG(19, 20))
	a, b, c = make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		ea, eb := rng.IntN(40)-20, rng.IntN(40)-20
		if i%64 == 0 { // a subnormal product
			ea, eb = -70, -70
		}
		a[i] = float32(math.Ldexp(1+rng.Float64(), ea))
		b[i] = float32(math.Ldexp(1+rng.Float64(), eb))
		if rng.IntN(2) == 0 {
			b[i] = -b[i]
		}
		c[i] = -float32(float64(a[i]) * float64(b[i])) // the exact product rounded once
	}
	return a, b, c
}

// ProbeArithmetic runs runtime/kernels' probe.kern on e and counts what its
// f32 arithmetic did (backend.Arithmetic).
func ProbeArithmetic(e Engine) (*backend.Arithmetic, error) {
	const n = 4096
	a, b, c := probeCases(n)
	bufs := make([]Mem, 4)
	defer func() {
		for _, m := range bufs {
			if m != nil {
				m.Free()
			}
		}
	}()
	for i, v := range [][]float32{a, b, c, make([]float32, 4*n)} {
		m, err := e.Alloc(4 * len(v))
		if err != nil {
			return nil, fmt.Errorf("metal: arithmetic probe: %w", err)
		}
		bufs[i] = m
		for j, x := range v {
			binary.LittleEndian.PutUint32(m.Bytes()[4*j:], math.Float32bits(x))
		}
	}
	p, err := e.Pipeline("probe.kern", "probe_arith_f32")
	if err != nil {
		return nil, fmt.Errorf("metal: arithmetic probe: %w", err)
	}
	args := []Arg{{Mem: bufs[0]}, {Mem: bufs[1]}, {Mem: bufs[2]}, {Mem: bufs[3]}, {Scalar: binary.LittleEndian.AppendUint32(nil, n)}}
	if err := e.Dispatch(p, [3]int{n / 256, 1, 1}, [3]int{256, 1, 1}, args...); err != nil {
		return nil, fmt.Errorf("metal: arithmetic probe: %w", err)
	}
	if err := e.Sync(); err != nil {
		return nil, fmt.Errorf("metal: arithmetic probe: %w", err)
	}
	out := bufs[3].Bytes()
	at := func(i, k int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(out[4*(4*i+k):])) }
	r := &backend.Arithmetic{N: n}
	for i := range n {
		prod := float32(float64(a[i]) * float64(b[i]))
		fused := float32(math.FMA(float64(a[i]), float64(b[i]), float64(c[i])))
		switch got := at(i, 0); {
		case math.Float32bits(got) == math.Float32bits(prod):
			r.RoundedProducts++
		case prod != 0 && math.Abs(float64(prod)) < 0x1p-126 && got == 0 && math.Signbit(float64(got)) == math.Signbit(float64(prod)):
			r.RoundedProducts++
			r.FlushedProducts++
		}
		if at(i, 1) == 0 {
			r.UnfusedSums++
		}
		if fused != 0 && at(i, 2) == fused {
			r.Contracted++
		}
		if math.Float32bits(at(i, 3)) == math.Float32bits(fused) || fused == 0 && at(i, 3) == 0 || flushedEqual(at(i, 3), fused) {
			r.FusedFMA++
		}
	}
	return r, nil
}

// flushedEqual reports whether got is want flushed to zero (want
// subnormal).
func flushedEqual(got, want float32) bool {
	return want != 0 && math.Abs(float64(want)) < 0x1p-126 && got == 0
}
