package cuda

import (
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	api "github.com/dgq-dev/dgq/runtime/backend"
)

// Backend returns a api.Backend on dev: f32 buffers in device memory,
// the shared-dialect kernels (Ops) and cuBLAS, all queued on dev's stream.
//
// Weights: raw bf16/f16/f32, q8, q4, q5, q6 and nvfp4 tensors stay on the
// device in their stored bits, re-laid at upload from the pack's interleaved
// blocks into planes (Ops.UploadTensor, planar.go), and are decoded there by
// the shared-dialect decoders (Ops.Dequant, bit-exact with
// codecs.DecodeRows; Caps.Resident lists them). A format without a device decoder would be decoded on the host
// with codecs.DecodeRows at upload and kept as f32.
// MatMulNT decodes a weight into a scratch buffer (raw f32 is used in place)
// and runs an f32 cuBLAS GEMM (MatMulNT); a fused dequantize-GEMM is later
// work.
//
// The backend does not own dev: Close releases its modules and scratch, not
// the device.
func Backend(dev *Device) api.Backend {
	return NewBackend(dev, BackendOptions{})
}

// Precision selects the arithmetic of a backend's matrix products.
type Precision int

const (
	// PrecisionF32 (the default) computes every product in f32 from
	// exactly decoded weights: the conformance suite's tolerances hold, and
	// a pack's logits match the CPU reference to ~1e-4 (docs/cuda.md).
	PrecisionF32 Precision = iota
	// PrecisionBF16 rounds activations to bfloat16 for the tensor cores
	// (weights decoded exactly, f32 accumulation, attention scores in TF32):
	// the fast mode for real-shape speed, with bf16-level error.
	PrecisionBF16
)

// String is "f32" or "bf16".
func (p Precision) String() string {
	if p == PrecisionBF16 {
		return "bf16"
	}
	return "f32"
}

// BackendOptions tune NewBackend. The zero value is PrecisionF32.
type BackendOptions struct {
	Precision Precision
}

// NewBackend returns a api.Backend on dev with options o (Backend(dev)
// is NewBackend(dev, BackendOptions{})).
func NewBackend(dev *Device, o BackendOptions) api.Backend {
	return &backend{d: dev, ops: NewOps(dev), fast: o.Precision == PrecisionBF16}
}

type backend struct {
	d       *Device
	ops     *Ops
	fast    bool      // PrecisionBF16
	scratch *Buffer   // f32 staging of a decoded weight for MatMulNT
	sc      opScratch // grow-only scratch of the ops of backend_ops.go
}

type cudaBuf struct {
	be *backend
	b  *Buffer
	n  int
}

func (b *cudaBuf) Len() int { return b.n }
func (b *cudaBuf) Free() error {
	if b.b == nil {
		return nil
	}
	err := b.b.Free()
	b.b = nil
	return err
}

// cudaWeight is a weight on the device in its stored bits, planar
// (resident, planar.go), or, for a format without a device decoder, its
// host-decoded f32 values.
type cudaWeight struct {
	be   *backend
	f    codecs.Format
	dt   codecs.DType
	geom codecs.Matrix
	b    *Buffer
	f32  bool // b holds Rows·K f32 values (raw f32, or decoded on the host)
}

func (w *cudaWeight) Rows() int             { return int(w.geom.Rows) }
func (w *cudaWeight) Cols() int             { return int(w.geom.K) }
func (w *cudaWeight) Format() codecs.Format { return w.f }
func (w *cudaWeight) DType() codecs.DType   { return w.dt }
func (w *cudaWeight) Free() error {
	if w.b == nil {
		return nil
	}
	err := w.b.Free()
	w.b = nil
	return err
}

func (c *backend) Name() string { return "cuda" }

func (c *backend) Caps() api.Caps {
	return api.Caps{Device: c.d.Name(), Memory: c.d.TotalMemory(), Formats: codecs.Formats(),
		Resident: []codecs.Format{codecs.Raw, codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4}}
}

func (c *backend) Alloc(n int) (api.Buf, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: Alloc of %d values", n)
	}
	b, err := c.d.Alloc(4 * int64(n))
	if err != nil {
		return nil, err
	}
	return &cudaBuf{be: c, b: b, n: n}, nil
}

func (c *backend) buf(b api.Buf) (*cudaBuf, error) {
	cb, ok := b.(*cudaBuf)
	if !ok || cb == nil || cb.be != c {
		return nil, fmt.Errorf("cuda: buffer %T is not of this backend", b)
	}
	if cb.b == nil {
		return nil, fmt.Errorf("cuda: buffer freed")
	}
	return cb, nil
}

func (c *backend) weight(w api.Weight) (*cudaWeight, error) {
	cw, ok := w.(*cudaWeight)
	if !ok || cw == nil || cw.be != c {
		return nil, fmt.Errorf("cuda: weight %T is not of this backend", w)
	}
	if cw.b == nil {
		return nil, fmt.Errorf("cuda: weight freed")
	}
	return cw, nil
}

func (c *backend) Upload(dst api.Buf, src []float32) error {
	d, err := c.buf(dst)
	if err != nil {
		return err
	}
	if len(src) > d.n {
		return fmt.Errorf("cuda: Upload of %d values into %d", len(src), d.n)
	}
	return d.b.Upload(Bytes(src))
}

func (c *backend) Download(src api.Buf, dst []float32) error {
	s, err := c.buf(src)
	if err != nil {
		return err
	}
	if len(dst) > s.n {
		return fmt.Errorf("cuda: Download of %d values from %d", len(dst), s.n)
	}
	return s.b.Download(Bytes(dst))
}

func (c *backend) UploadWeight(t api.TensorData) (api.Weight, error) {
	g, err := t.Matrix()
	if err != nil {
		return nil, err
	}
	w := &cudaWeight{be: c, f: t.Format, dt: t.DType, geom: g}
	f, dt, host := t.Format, t.DType, t.Bytes
	switch {
	case f == codecs.Raw && dt == codecs.F32:
		w.f32 = true // already f32 values (little-endian)
	case CanDequant(f, dt):
		// Resident in the device's planar layout, re-laid on the device.
	default:
		v := make([]float32, g.Elements())
		if err := codecs.DecodeRows(f, dt, g, t.Bytes, 0, g.Rows, v); err != nil {
			return nil, fmt.Errorf("cuda: tensor %q: %w", t.Name, err)
		}
		f, dt, host, w.f32 = codecs.Raw, codecs.F32, Bytes(v), true
	}
	if w.b, err = c.ops.UploadTensor(f, dt, g, host); err != nil {
		return nil, fmt.Errorf("cuda: tensor %q: %w", t.Name, err)
	}
	return w, nil
}

func (c *backend) Sync() error { return c.d.Sync() }

func (c *backend) Close() error {
	var first error
	if c.scratch != nil {
		first = c.scratch.Free()
		c.scratch = nil
	}
	if err := c.sc.free(); err != nil && first == nil {
		first = err
	}
	if err := c.closeMoE(); err != nil && first == nil {
		first = err
	}
	if err := c.ops.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

func (c *backend) RMSNorm(y, x, w api.Buf, rows, n int, eps float32) error {
	if err := api.CheckRMSNorm(y, x, w, rows, n); err != nil {
		return err
	}
	yb, err := c.buf(y)
	if err != nil {
		return err
	}
	xb, err := c.buf(x)
	if err != nil {
		return err
	}
	var wp Ptr
	if w != nil {
		wb, err := c.buf(w)
		if err != nil {
			return err
		}
		wp = wb.b.Ptr()
	}
	return c.ops.RMSNorm(yb.b.Ptr(), xb.b.Ptr(), wp, rows, n, eps)
}

// dequant queues the decoding of w into out (Rows·K f32 values).
func (c *backend) dequant(out Ptr, w *cudaWeight) error {
	switch {
	case w.geom.Elements() == 0:
		return nil
	case w.f32:
		return c.copyF32(out, w.b.Ptr(), w.geom.Elements())
	default:
		return c.ops.Dequant(out, w.b.Ptr(), w.f, w.dt, w.geom)
	}
}

// copyF32 queues a device-to-device copy of n f32 values.
func (c *backend) copyF32(dst, src Ptr, n int64) error {
	d := &Buffer{d: c.d, ptr: dst, size: 4 * n}
	s := &Buffer{d: c.d, ptr: src, size: 4 * n}
	return d.CopyFrom(0, s, 0, 4*n)
}

func (c *backend) Dequant(out api.Buf, w api.Weight) error {
	if err := api.CheckDequant(out, w); err != nil {
		return err
	}
	ob, err := c.buf(out)
	if err != nil {
		return err
	}
	cw, err := c.weight(w)
	if err != nil {
		return err
	}
	return c.dequant(ob.b.Ptr(), cw)
}

func (c *backend) MatMulNT(cb, a api.Buf, w api.Weight, m int) error {
	if err := api.CheckMatMulNT(cb, a, w, m); err != nil {
		return err
	}
	co, err := c.buf(cb)
	if err != nil {
		return err
	}
	ab, err := c.buf(a)
	if err != nil {
		return err
	}
	cw, err := c.weight(w)
	if err != nil {
		return err
	}
	n, k := cw.Rows(), cw.Cols()
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		return c.d.do(func() error {
			return check("cuMemsetD8Async", ccall(drv.cuMemsetD8Async, uintptr(co.b.Ptr()), 0, uintptr(4*m*n), c.d.stream))
		})
	}
	if handled, err := c.matMulFast(co.b.Ptr(), ab.b.Ptr(), cw, m); handled {
		return err // bf16 precision: tensor cores (fast_matmul.go)
	}
	wp := cw.b.Ptr()
	if !cw.f32 {
		sb, err := c.grow(&c.scratch, 4*cw.geom.Elements())
		if err != nil {
			return err
		}
		if err := c.dequant(sb.Ptr(), cw); err != nil {
			return err
		}
		wp = sb.Ptr()
	}
	return c.d.MatMulNT(co.b.Ptr(), ab.b.Ptr(), wp, m, n, k)
}

func (c *backend) RoPE(x api.Buf, rows, heads, headDim, pos0 int, invFreq api.Buf) error {
	if err := api.CheckRoPE(x, rows, heads, headDim, pos0, invFreq); err != nil {
		return err
	}
	xb, err := c.buf(x)
	if err != nil {
		return err
	}
	fb, err := c.buf(invFreq)
	if err != nil {
		return err
	}
	return c.ops.RoPE(xb.b.Ptr(), fb.b.Ptr(), rows, heads, headDim, pos0)
}

func (c *backend) Softcap(x api.Buf, n int, cp float32) error {
	if err := api.CheckSoftcap(x, n, cp); err != nil {
		return err
	}
	xb, err := c.buf(x)
	if err != nil {
		return err
	}
	return c.ops.Softcap(xb.b.Ptr(), int64(n), cp)
}

func (c *backend) RowStats(logits api.Buf, rows, v int, temperature float32, entropy, argmax api.Buf) error {
	if err := api.CheckRowStats(logits, rows, v, temperature, entropy, argmax); err != nil {
		return err
	}
	lb, err := c.buf(logits)
	if err != nil {
		return err
	}
	eb, err := c.buf(entropy)
	if err != nil {
		return err
	}
	ab, err := c.buf(argmax)
	if err != nil {
		return err
	}
	return c.ops.RowStats(lb.b.Ptr(), eb.b.Ptr(), ab.b.Ptr(), rows, v, temperature)
}
