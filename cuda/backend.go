package cuda

import (
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	api "github.com/dgq-dev/dgq/runtime/backend"
)

// Backend returns a api.Backend on dev with the default Options (f32
// precision): f32 buffers in device memory, the kernels of the shared
// dialect (Ops) and cuBLAS, all queued on dev's stream.
//
// Weights: raw bf16/f16/f32, q8, q4, q5, q6 and nvfp4 tensors stay on the
// device in their stored bits, re-laid at upload from the pack's interleaved
// blocks into planes (Ops.UploadTensor, planar.go), and are decoded there by
// the dialect's decoders (bit-exact with codecs.DecodeRows; Caps.Resident
// lists them); a format without a device decoder would be decoded on the
// host with codecs.DecodeRows at upload and kept as f32.
//
// The backend does not own dev: Close releases its modules and scratch, not
// the device.
func Backend(dev *Device) api.Backend {
	return newBackend(dev, Options{})
}

// NewBackend returns a api.Backend on dev with options o: the kernel of
// every op is chosen here, once, from o and the device (Caps().Kernels
// names them). Options outside their constants are an error.
func NewBackend(dev *Device, o Options) (api.Backend, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return newBackend(dev, o), nil
}

func newBackend(dev *Device, o Options) *backend {
	major, minor := dev.Capability()
	return &backend{d: dev, ops: NewOps(dev), k: planKernels(o, major, minor), scratch: newArena(dev)}
}

// backend is the CUDA api.Backend: its kernels chosen once (k), its
// scratch in one arena.
type backend struct {
	d       *Device
	ops     *Ops
	k       kernelPlan
	scratch arena
	routes  *api.Routes // RecordRoutes' recorder, nil when not recording
}

// devMem is a backend's device memory behind a buffer or a weight.
type devMem struct {
	be *backend
	b  *Buffer // nil once freed
}

func (m *devMem) mem() *devMem { return m }

// Free releases the memory after the work queued on it; it may be called
// more than once.
func (m *devMem) Free() error {
	if m.b == nil {
		return nil
	}
	err := m.b.Free()
	m.b = nil
	return err
}

// cudaBuf is a api.Buf of n f32 values.
type cudaBuf struct {
	devMem
	n int
}

func (b *cudaBuf) Len() int { return b.n }

// cudaWeight is a weight on the device in its stored bits, planar
// (resident, planar.go), or, for a format without a device decoder, its
// host-decoded f32 values.
type cudaWeight struct {
	devMem
	f    codecs.Format
	dt   codecs.DType
	geom codecs.Matrix
	f32  bool // b holds Rows·K f32 values (raw f32, or decoded on the host)
}

// resident is the format and dtype of the bits on the device: the stored
// ones, or raw f32 for values decoded at upload.
func (w *cudaWeight) resident() (codecs.Format, codecs.DType) {
	if w.f32 {
		return codecs.Raw, codecs.F32
	}
	return w.f, w.dt
}

func (w *cudaWeight) Rows() int             { return int(w.geom.Rows) }
func (w *cudaWeight) Cols() int             { return int(w.geom.K) }
func (w *cudaWeight) Format() codecs.Format { return w.f }
func (w *cudaWeight) DType() codecs.DType   { return w.dt }

func (c *backend) Name() string { return "cuda" }

func (c *backend) Caps() api.Caps {
	return api.Caps{Device: c.d.Name(), Memory: c.d.TotalMemory(), Formats: codecs.Formats(),
		Resident: []codecs.Format{codecs.Raw, codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4},
		Kernels:  c.k.names(), Numerics: Numerics}
}

// Numerics is the arithmetic of dgq's CUDA kernels: NVRTC's defaults
// (-ftz=false: subnormals kept; -prec-div=true and -prec-sqrt=true: IEEE
// division and square root) and the CUDA math library's single-precision
// bounds (CUDA C++ Programming Guide, "Mathematical Functions", standard
// functions: expf 2, logf 1, tanhf 2, sinf 2, cosf 2, rsqrtf 2 ulp). The
// guide measures against the correctly rounded result, so each bound here
// adds that rounding's half ulp.
var Numerics = api.Numerics{
	ULP: api.MathULP{Exp: 2.5, Log: 1.5, Tanh: 2.5, Sin: 2.5, Cos: 2.5, Sqrt: api.CorrectlyRounded,
		Rsqrt: 2.5, Div: api.CorrectlyRounded},
	Source: "CUDA C++ Programming Guide, Mathematical Functions (single precision); NVRTC -ftz=false -prec-div=true -prec-sqrt=true",
}

func (c *backend) Alloc(n int) (api.Buf, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: Alloc of %d values", n)
	}
	b, err := c.d.Alloc(4 * int64(n))
	if err != nil {
		return nil, err
	}
	return &cudaBuf{devMem: devMem{be: c, b: b}, n: n}, nil
}

// own returns v as a buffer or weight (T) of this backend that is not
// freed; what names its kind in the error.
func own[T interface {
	*cudaBuf | *cudaWeight
	mem() *devMem
}](c *backend, v any, what string) (T, error) {
	t, ok := v.(T)
	if !ok || t == nil || t.mem().be != c {
		return nil, fmt.Errorf("cuda: %s %T is not of this backend", what, v)
	}
	if t.mem().b == nil {
		return nil, fmt.Errorf("cuda: %s freed", what)
	}
	return t, nil
}

func (c *backend) buf(b api.Buf) (*cudaBuf, error) { return own[*cudaBuf](c, b, "buffer") }

func (c *backend) weight(w api.Weight) (*cudaWeight, error) {
	return own[*cudaWeight](c, w, "weight")
}

// hostCopy returns the device memory of b for a copy of n values to or from
// the host (op names the copy).
func (c *backend) hostCopy(b api.Buf, n int, op string) (*Buffer, error) {
	cb, err := c.buf(b)
	if err != nil {
		return nil, err
	}
	if n > cb.n {
		return nil, fmt.Errorf("cuda: %s of %d values, buffer of %d", op, n, cb.n)
	}
	return cb.b, nil
}

func (c *backend) Upload(dst api.Buf, src []float32) error {
	d, err := c.hostCopy(dst, len(src), "Upload")
	if err != nil {
		return err
	}
	return d.Upload(Bytes(src))
}

func (c *backend) Download(src api.Buf, dst []float32) error {
	s, err := c.hostCopy(src, len(dst), "Download")
	if err != nil {
		return err
	}
	return s.Download(Bytes(dst))
}

func (c *backend) UploadWeight(t api.TensorData) (api.Weight, error) {
	g, err := t.Matrix()
	if err != nil {
		return nil, err
	}
	w := &cudaWeight{devMem: devMem{be: c}, f: t.Format, dt: t.DType, geom: g}
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
	return errors.Join(c.scratch.free(), c.ops.Close())
}

func (c *backend) RMSNorm(y, x, w api.Buf, rows, n int, eps float32) error {
	bufs := []api.Buf{y, x}
	if w != nil {
		bufs = append(bufs, w)
	}
	p, err := c.operands(api.CheckRMSNorm(y, x, w, rows, n), bufs...)
	if err != nil {
		return err
	}
	var wp Ptr // 0: unscaled
	if w != nil {
		wp = p[2]
	}
	return c.ops.RMSNorm(p[0], p[1], wp, rows, n, eps)
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
	cw, p, err := c.weightOperands(api.CheckDequant(out, w), w, out)
	if err != nil {
		return err
	}
	return c.dequant(p[0], cw)
}

func (c *backend) MatMulNT(cb, a api.Buf, w api.Weight, m int) error {
	cw, p, err := c.weightOperands(api.CheckMatMulNT(cb, a, w, m), w, cb, a)
	if err != nil {
		return err
	}
	co, ap := p[0], p[1]
	n, k := cw.Rows(), cw.Cols()
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		return c.d.do(func() error {
			return check("cuMemsetD8Async", ccall(drv.cuMemsetD8Async, uintptr(co), 0, uintptr(4*m*n), c.d.stream))
		})
	}
	if handled, err := c.matMulFast(co, ap, cw, m); handled {
		return err // bf16 precision: tensor cores (fast_matmul.go)
	}
	wp := cw.b.Ptr()
	if !cw.f32 {
		if wp, err = c.scratch.ptr(scrMatMulW, 4*cw.geom.Elements()); err != nil {
			return err
		}
		if err := c.dequant(wp, cw); err != nil {
			return err
		}
	}
	return c.d.MatMulNT(co, ap, wp, m, n, k)
}

func (c *backend) RoPE(x api.Buf, rows, heads, headDim, pos0 int, invFreq api.Buf) error {
	p, err := c.operands(api.CheckRoPE(x, rows, heads, headDim, pos0, invFreq), x, invFreq)
	if err != nil {
		return err
	}
	return c.ops.RoPE(p[0], p[1], rows, heads, headDim, pos0)
}

func (c *backend) Softcap(x api.Buf, n int, cp float32) error {
	p, err := c.operands(api.CheckSoftcap(x, n, cp), x)
	if err != nil {
		return err
	}
	return c.ops.Softcap(p[0], int64(n), cp)
}

func (c *backend) RowStats(logits api.Buf, rows, v int, temperature float32, entropy, argmax api.Buf) error {
	p, err := c.operands(api.CheckRowStats(logits, rows, v, temperature, entropy, argmax), logits, entropy, argmax)
	if err != nil {
		return err
	}
	return c.ops.RowStats(p[0], p[1], p[2], rows, v, temperature)
}
