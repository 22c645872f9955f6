package runtime

import (
	"fmt"
	goruntime "runtime"

	"github.com/dgq-dev/dgq/codecs"
)

// CPUBackend returns the reference backend: it runs the CPU runtime's own
// code (rmsNormRows, the banded float64 matmul, the codecs' scalar decoders)
// on host slices, on GOMAXPROCS goroutines; results do not depend on their
// number. Weights are read in place from the tensor's bytes (the pack must
// stay open while they are in use). Ops run synchronously.
func CPUBackend() Backend {
	m := &Model{workers: goruntime.GOMAXPROCS(0)}
	m.scratch.New = func() any { return new(scratch) }
	return &cpuBackend{m: m}
}

type cpuBackend struct {
	m *Model // only workers and scratch: the matmul machinery
}

type cpuBuf struct{ v []float32 }

func (b *cpuBuf) Len() int    { return len(b.v) }
func (b *cpuBuf) Free() error { b.v = nil; return nil }

type cpuWeight struct{ w *matrix }

func (w *cpuWeight) Rows() int             { return w.w.rows() }
func (w *cpuWeight) Cols() int             { return w.w.cols() }
func (w *cpuWeight) Format() codecs.Format { return w.w.f }
func (w *cpuWeight) DType() codecs.DType   { return w.w.dt }
func (w *cpuWeight) Free() error           { return nil }

func (c *cpuBackend) Name() string { return "cpu" }

func (c *cpuBackend) Caps() Caps {
	return Caps{Device: "host", Host: true, Formats: codecs.Formats(), Resident: codecs.Formats()}
}

func (c *cpuBackend) Alloc(n int) (Buf, error) {
	if n <= 0 {
		return nil, fmt.Errorf("runtime: Alloc of %d values", n)
	}
	return &cpuBuf{v: make([]float32, n)}, nil
}

func cpuBufOf(b Buf) ([]float32, error) {
	cb, ok := b.(*cpuBuf)
	if !ok || cb == nil {
		return nil, fmt.Errorf("runtime: buffer %T is not a cpu buffer", b)
	}
	if cb.v == nil {
		return nil, fmt.Errorf("runtime: buffer freed")
	}
	return cb.v, nil
}

func cpuWeightOf(w Weight) (*matrix, error) {
	cw, ok := w.(*cpuWeight)
	if !ok || cw == nil {
		return nil, fmt.Errorf("runtime: weight %T is not a cpu weight", w)
	}
	return cw.w, nil
}

func (c *cpuBackend) Upload(dst Buf, src []float32) error {
	d, err := cpuBufOf(dst)
	if err != nil {
		return err
	}
	if len(src) > len(d) {
		return fmt.Errorf("runtime: Upload of %d values into %d", len(src), len(d))
	}
	copy(d, src)
	return nil
}

func (c *cpuBackend) Download(src Buf, dst []float32) error {
	s, err := cpuBufOf(src)
	if err != nil {
		return err
	}
	if len(dst) > len(s) {
		return fmt.Errorf("runtime: Download of %d values from %d", len(dst), len(s))
	}
	copy(dst, s)
	return nil
}

func (c *cpuBackend) UploadWeight(t TensorData) (Weight, error) {
	w, err := newMatrix(t)
	if err != nil {
		return nil, fmt.Errorf("runtime: tensor %q: %w", t.Name, err)
	}
	return &cpuWeight{w: w}, nil
}

func (c *cpuBackend) Sync() error  { return nil }
func (c *cpuBackend) Close() error { return nil }

func (c *cpuBackend) RMSNorm(y, x, w Buf, rows, n int, eps float32) error {
	if err := CheckRMSNorm(y, x, w, rows, n); err != nil {
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

func (c *cpuBackend) Dequant(out Buf, w Weight) error {
	if err := CheckDequant(out, w); err != nil {
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

func (c *cpuBackend) MatMulNT(cb, a Buf, w Weight, m int) error {
	if err := CheckMatMulNT(cb, a, w, m); err != nil {
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
	c.m.matmul(mw, 0, n, x, m, cv[:m*n], n)
	return nil
}

func (c *cpuBackend) RoPE(x Buf, rows, heads, headDim, pos0 int, invFreq Buf) error {
	if err := CheckRoPE(x, rows, heads, headDim, pos0, invFreq); err != nil {
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
	r := &rope{hd: headDim, invFreq: inv[:headDim/2]}
	cos, sin := r.table(pos0, rows)
	half := headDim / 2
	for row := range rows {
		for h := range heads {
			o := (row*heads + h) * headDim
			applyRope(xv[o:o+headDim], cos[row*half:(row+1)*half], sin[row*half:(row+1)*half])
		}
	}
	return nil
}

func (c *cpuBackend) Softcap(x Buf, n int, cp float32) error {
	if err := CheckSoftcap(x, n, cp); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	for i, z := range xv[:n] {
		xv[i] = softcap(z, cp)
	}
	return nil
}

func (c *cpuBackend) RowStats(logits Buf, rows, v int, temperature float32, entropy, argmax Buf) error {
	if err := CheckRowStats(logits, rows, v, temperature, entropy, argmax); err != nil {
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
		TemperRow(lv[r*v:(r+1)*v], temperature, t)
		ev[r] = Entropy(t)
		av[r] = float32(Argmax(t))
	}
	return nil
}
