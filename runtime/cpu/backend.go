package cpu

import (
	"context"
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

func init() {
	backend.Register("cpu", func(c backend.Config) (backend.Backend, error) {
		if c.Precision != backend.F32 {
			return nil, fmt.Errorf("%w: the cpu backend computes in f32 only (precision %s)", backend.ErrUnknown, c.Precision)
		}
		return New(c.Workers), nil
	})
}

// Backend is the reference backend: the ops as plain loops over host
// slices (banded matrix products accumulated in float64, attention, the
// router and experts, the soft embedding, norms, rope: the files of this
// package), on its own pool of goroutines; results never depend on their
// number. Weights are read in place from the tensor's bytes (the pack must
// stay open while they are in use). Ops run synchronously.
type Backend struct {
	p *pool
	// routes, when not nil, receives the router's selections and their
	// margins (RecordRoutes).
	routes *backend.Routes
	// ctx, when not nil, interrupts the long ops (SetContext).
	ctx context.Context
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Cancelable = (*Backend)(nil)
)

// SetContext makes the long ops (MatMulNT, MoE, SoftEmbed, Attention, the
// row-wise sampler ops) stop between bands of work once ctx is done and
// return an error wrapping ctx.Err() (backend.Cancelable); nil
// removes it. A band is a few milliseconds of work, so an op stops within
// milliseconds. Results of ops that complete do not depend on it.
func (c *Backend) SetContext(ctx context.Context) {
	c.ctx, c.p.done = ctx, nil
	if ctx != nil {
		c.p.done = ctx.Done()
	}
}

// interrupted is the error of op when the context of SetContext is done
// (the op may have stopped part way), else nil.
func (c *Backend) interrupted(op string) error {
	if c.ctx == nil || c.ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("cpu: %s interrupted: %w", op, c.ctx.Err())
}

// New returns a CPU backend running on workers goroutines (≤ 0: GOMAXPROCS).
func New(workers int) *Backend { return &Backend{p: newPool(workers)} }

type cpuBuf struct{ v []float32 }

func (b *cpuBuf) Len() int    { return len(b.v) }
func (b *cpuBuf) Free() error { b.v = nil; return nil }

type cpuWeight struct{ w *matrix }

func (w *cpuWeight) Rows() int             { return w.w.rows() }
func (w *cpuWeight) Cols() int             { return w.w.cols() }
func (w *cpuWeight) Format() codecs.Format { return w.w.f }
func (w *cpuWeight) DType() codecs.DType   { return w.w.dt }
func (w *cpuWeight) Free() error           { return nil }

func (c *Backend) Name() string { return "cpu" }

func (c *Backend) Caps() backend.Caps {
	return backend.Caps{Device: "host", Host: true, Formats: codecs.Formats(), Resident: codecs.Formats(), Numerics: Numerics}
}

// Numerics is the CPU backend's arithmetic: IEEE float32 with gradual
// underflow (Go never flushes), and every math function evaluated in
// float64 by Go's math package (within one float64 ulp) and rounded once to
// float32: half an f32 ulp, plus 2⁻²⁹ of one, which the suite's bounds
// absorb. The reciprocal square root is 1/f32(√x), two roundings: within
// 2ε relative, at most 2 ulp.
var Numerics = backend.Numerics{
	ULP:    backend.MathULP{Exp: 0.5, Log: 0.5, Tanh: 0.5, Sin: 0.5, Cos: 0.5, Sqrt: 0.5, Rsqrt: 2, Div: 0.5},
	Source: "Go math (float64) rounded to float32",
}

func (c *Backend) Alloc(n int) (backend.Buf, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cpu: Alloc of %d values", n)
	}
	return &cpuBuf{v: make([]float32, n)}, nil
}

func cpuBufOf(b backend.Buf) ([]float32, error) {
	cb, ok := b.(*cpuBuf)
	if !ok || cb == nil {
		return nil, fmt.Errorf("cpu: buffer %T is not a cpu buffer", b)
	}
	if cb.v == nil {
		return nil, fmt.Errorf("cpu: buffer freed")
	}
	return cb.v, nil
}

func cpuWeightOf(w backend.Weight) (*matrix, error) {
	cw, ok := w.(*cpuWeight)
	if !ok || cw == nil {
		return nil, fmt.Errorf("cpu: weight %T is not a cpu weight", w)
	}
	return cw.w, nil
}

func (c *Backend) Upload(dst backend.Buf, src []float32) error {
	d, err := cpuBufOf(dst)
	if err != nil {
		return err
	}
	if len(src) > len(d) {
		return fmt.Errorf("cpu: Upload of %d values into %d", len(src), len(d))
	}
	copy(d, src)
	return nil
}

func (c *Backend) Download(src backend.Buf, dst []float32) error {
	s, err := cpuBufOf(src)
	if err != nil {
		return err
	}
	if len(dst) > len(s) {
		return fmt.Errorf("cpu: Download of %d values from %d", len(dst), len(s))
	}
	copy(dst, s)
	return nil
}

func (c *Backend) UploadWeight(t backend.TensorData) (backend.Weight, error) {
	w, err := newMatrix(t)
	if err != nil {
		return nil, fmt.Errorf("cpu: tensor %q: %w", t.Name, err)
	}
	return &cpuWeight{w: w}, nil
}

func (c *Backend) Sync() error  { return nil }
func (c *Backend) Close() error { return nil }

func (c *Backend) RMSNorm(y, x, w backend.Buf, rows, n int, eps float32) error {
	if err := backend.CheckRMSNorm(y, x, w, rows, n); err != nil {
		return err
	}
	yv, err := cpuBufOf(y)
	if err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	var wv []float32
	if w != nil {
		if wv, err = cpuBufOf(w); err != nil {
			return err
		}
		wv = wv[:n]
	}
	rmsNormRows(xv[:rows*n], wv, yv[:rows*n], n, eps)
	return nil
}

func (c *Backend) Dequant(out backend.Buf, w backend.Weight) error {
	if err := backend.CheckDequant(out, w); err != nil {
		return err
	}
	o, err := cpuBufOf(out)
	if err != nil {
		return err
	}
	mw, err := cpuWeightOf(w)
	if err != nil {
		return err
	}
	if mw.rows() > 0 {
		mw.decode(0, mw.rows(), o)
	}
	return nil
}

func (c *Backend) MatMulNT(cb, a backend.Buf, w backend.Weight, m int) error {
	if err := backend.CheckMatMulNT(cb, a, w, m); err != nil {
		return err
	}
	cv, err := cpuBufOf(cb)
	if err != nil {
		return err
	}
	av, err := cpuBufOf(a)
	if err != nil {
		return err
	}
	mw, err := cpuWeightOf(w)
	if err != nil {
		return err
	}
	n, k := mw.rows(), mw.cols()
	if m == 0 || n == 0 {
		return nil
	}
	x := toF64(av[:m*k], nil)
	c.p.matmul(mw, 0, n, x, m, cv[:m*n], n)
	return c.interrupted("MatMulNT")
}

func (c *Backend) RoPE(x backend.Buf, rows, heads, headDim, pos0 int, invFreq backend.Buf) error {
	if err := backend.CheckRoPE(x, rows, heads, headDim, pos0, invFreq); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	inv, err := cpuBufOf(invFreq)
	if err != nil {
		return err
	}
	cos, sin := ropeTable(inv[:headDim/2], pos0, rows)
	half := headDim / 2
	for row := range rows {
		for h := range heads {
			o := (row*heads + h) * headDim
			applyRope(xv[o:o+headDim], cos[row*half:(row+1)*half], sin[row*half:(row+1)*half])
		}
	}
	return nil
}

func (c *Backend) Softcap(x backend.Buf, n int, cp float32) error {
	if err := backend.CheckSoftcap(x, n, cp); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	for i0 := 0; i0 < n; i0 += elementChunk {
		if c.p.stopped() {
			return c.interrupted("Softcap")
		}
		for i := i0; i < min(n, i0+elementChunk); i++ {
			xv[i] = softcap(xv[i], cp)
		}
	}
	return nil
}

// elementChunk is how many values an element-wise op handles between two
// looks at its context (a millisecond or less of work).
const elementChunk = 1 << 16

func (c *Backend) RowStats(logits backend.Buf, rows, v int, temperature float32, entropy, argmax backend.Buf) error {
	if err := backend.CheckRowStats(logits, rows, v, temperature, entropy, argmax); err != nil {
		return err
	}
	lv, err := cpuBufOf(logits)
	if err != nil {
		return err
	}
	ev, err := cpuBufOf(entropy)
	if err != nil {
		return err
	}
	av, err := cpuBufOf(argmax)
	if err != nil {
		return err
	}
	t := make([]float32, v)
	for r := range rows {
		if c.p.stopped() {
			return c.interrupted("RowStats")
		}
		TemperRow(lv[r*v:(r+1)*v], temperature, t)
		ev[r] = Entropy(t)
		av[r] = float32(Argmax(t))
	}
	return nil
}
