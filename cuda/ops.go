package cuda

import (
	"fmt"
	"sync"

	"github.com/dgq-dev/dgq/codecs"
)

// Ops launches the package's kernels (KernelFiles) on one device; it
// compiles each kernel file at first use (through the disk cache).
type Ops struct {
	d    *Device
	mu   sync.Mutex
	mods map[string]*Module

	up    sync.Mutex // UploadTensor's staging (planar.go)
	chunk int64
	stage staging
}

// NewOps returns the kernel launcher of d.
func NewOps(d *Device) *Ops { return &Ops{d: d, mods: map[string]*Module{}} }

func (o *Ops) module(file string) (*Module, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m, ok := o.mods[file]; ok {
		return m, nil
	}
	m, err := o.d.CompileKernel(file)
	if err != nil {
		return nil, err
	}
	o.mods[file] = m
	return m, nil
}

// Close unloads the compiled modules and frees the upload staging.
func (o *Ops) Close() error {
	o.up.Lock()
	first := o.freeStaging()
	o.up.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, m := range o.mods {
		if err := m.Close(); err != nil && first == nil {
			first = err
		}
		delete(o.mods, k)
	}
	return first
}

// gridFor returns a 1-D grid of block-thread groups covering n items, capped
// (the kernels stride over the rest).
func (o *Ops) gridFor(n int64, block uint32) uint32 {
	g := (n + int64(block) - 1) / int64(block)
	if max := int64(o.d.sms) * 32; max > 0 && g > max {
		g = max
	}
	if g < 1 {
		g = 1
	}
	return uint32(g)
}

// stride launches kernel of file as a 1-D grid-stride kernel over n items
// in groups of 256 threads (gridFor).
func (o *Ops) stride(file, kernel string, n int64, args ...any) error {
	m, err := o.module(file)
	if err != nil {
		return err
	}
	const block = 256
	return m.Launch(kernel, [3]uint32{o.gridFor(n, block), 1, 1}, [3]uint32{block, 1, 1}, 0, args...)
}

// perRow launches kernel of file with one group per row (groups groups, the
// kernel striding over any further rows) of n values: 1024 threads a group
// for rows of 8192 values or more, else 256.
func (o *Ops) perRow(file, kernel string, groups uint32, n int, args ...any) error {
	m, err := o.module(file)
	if err != nil {
		return err
	}
	block := uint32(256)
	if n >= 8192 {
		block = 1024
	}
	return m.Launch(kernel, [3]uint32{groups, 1, 1}, [3]uint32{block, 1, 1}, 0, args...)
}

const normThreads = 256

// RMSNorm queues y = RMSNorm(x)·w over rows of n f32 values; w may be 0 for
// the unscaled form.
func (o *Ops) RMSNorm(y, x, w Ptr, rows, n int, eps float32) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("cuda: RMSNorm of %d×%d", rows, n)
	}
	m, err := o.module("rmsnorm.kern")
	if err != nil {
		return err
	}
	grid, block := [3]uint32{uint32(rows), 1, 1}, [3]uint32{normThreads, 1, 1}
	if w == 0 {
		return m.Launch("rmsnorm_unscaled_f32", grid, block, 0, x, y, uint32(n), eps)
	}
	return m.Launch("rmsnorm_f32", grid, block, 0, x, w, y, uint32(n), eps)
}

// DequantQ4 queues the decoding of a whole q4 tensor of geometry mtx (dtype
// dt), resident at enc in its planar layout (UploadTensor), into rows·K f32
// values at out.
func (o *Ops) DequantQ4(out, enc Ptr, dt codecs.DType, mtx codecs.Matrix) error {
	p, err := planarLayout(codecs.Q4, dt, mtx)
	if err != nil {
		return err
	}
	if mtx.Rows > 1<<31 || mtx.K > 1<<31 {
		return fmt.Errorf("cuda: q4 tensor %d×%d not supported", mtx.Rows, mtx.K)
	}
	q := p.ptrs(enc, 0)
	return o.dequantQ4(out, q[0], q[1], q[2], mtx)
}

// dequantQ4 queues dequant_q4_f32 over the planes of mtx.Rows rows.
func (o *Ops) dequantQ4(out, codes, scales, biases Ptr, mtx codecs.Matrix) error {
	if mtx.Elements() == 0 {
		return nil
	}
	return o.stride("dequant.kern", "dequant_q4_f32", mtx.Rows*mtx.K/2, codes, scales, biases, out, uint32(mtx.Rows), uint32(mtx.K))
}

// WidenBF16 queues dst[i] = f32(src[i]) for n bf16 values.
func (o *Ops) WidenBF16(dst, src Ptr, n int64) error {
	return o.stride("dequant.kern", "widen_bf16_f32", n, src, dst, uint64(n))
}
