package metal

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// NewBackend returns a backend.Backend on the engine e (the Metal device, or
// the host engine in tests) with options o: f32 buffers in engine memory, the
// shared kernels of runtime/kernels and the Metal-specific ones of
// metal/kernels, every launch queued on e and run at its next Sync.
//
// Weights: raw bf16/f16/f32, q8, q4, q5, q6 and nvfp4 tensors stay in their
// stored bits, re-laid at upload from the pack's interleaved blocks into
// planes (kernels.ResidentLayout; relayout.kern on the engine), and are
// decoded where they are read by the common include's decoders (bit-exact
// with codecs.DecodeRows; Caps.Resident lists them); a format without a
// decoder would be decoded on the host at upload and kept as f32.
//
// The backend does not own e: Close releases its scratch, not the engine.
// Options outside their constants, and bf16 precision, are an error wrapping
// backend.ErrUnknown.
func NewBackend(e Engine, o BackendOptions) (backend.Backend, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: NewBackend without an engine", ErrArgument)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &metalBackend{e: e, o: o, pipes: map[pipeKey]Pipeline{}, scratch: map[string]Mem{}, chunk: uploadChunk}, nil
}

// metalBackend is the Metal backend.Backend over an Engine.
type metalBackend struct {
	e       Engine
	o       BackendOptions
	pipes   map[pipeKey]Pipeline
	scratch map[string]Mem  // grow-only scratch by name (scratch.go)
	routes  *backend.Routes // RecordRoutes' recorder, nil when not recording
	chunk   int             // bytes of pack data staged per re-lay step (UploadWeight)
	closed  bool
}

// pipeKey names a kernel: its unit and function.
type pipeKey struct{ unit, kernel string }

// engineMem is the engine memory behind a buffer or a weight.
type engineMem struct {
	be *metalBackend
	m  Mem // nil once freed
}

func (m *engineMem) mem() *engineMem { return m }

// Free releases the memory; work already queued on it keeps it (the
// engines' Mem.Free contract). It may be called more than once.
func (m *engineMem) Free() error {
	if m.m != nil {
		m.m.Free()
		m.m = nil
	}
	return nil
}

// metalBuf is a backend.Buf of n f32 values.
type metalBuf struct {
	engineMem
	n int
}

func (b *metalBuf) Len() int { return b.n }

// metalWeight is a weight in engine memory in its resident layout.
type metalWeight struct {
	engineMem
	f    codecs.Format // as stored in the pack
	dt   codecs.DType
	geom codecs.Matrix
	dec  decoder // how the kernels read the resident bits
}

func (w *metalWeight) Rows() int             { return int(w.geom.Rows) }
func (w *metalWeight) Cols() int             { return int(w.geom.K) }
func (w *metalWeight) Format() codecs.Format { return w.f }
func (w *metalWeight) DType() codecs.DType   { return w.dt }

func (b *metalBackend) Name() string { return "metal" }

// Caps names the engine's device; Memory is the device's recommended
// working set where the engine reports one (0 on the host engine).
func (b *metalBackend) Caps() backend.Caps {
	var memory uint64
	if d, ok := b.e.(interface{ Caps() DeviceCaps }); ok {
		memory = d.Caps().RecommendedMaxWorkingSetSize
	}
	return backend.Caps{Device: b.e.Name(), Memory: memory, Formats: codecs.Formats(),
		Resident: []codecs.Format{codecs.Raw, codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4},
		Kernels:  b.o.kernelNames(), Numerics: b.e.Numerics()}
}

// Alloc returns a buffer of n f32 values, zeroed.
func (b *metalBackend) Alloc(n int) (backend.Buf, error) {
	if err := b.live(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: metal: Alloc of %d values", ErrArgument, n)
	}
	m, err := b.e.Alloc(4 * n)
	if err != nil {
		return nil, fmt.Errorf("metal: Alloc of %d values: %w", n, err)
	}
	return &metalBuf{engineMem: engineMem{be: b, m: m}, n: n}, nil
}

// live fails once the backend is closed.
func (b *metalBackend) live() error {
	if b.closed {
		return fmt.Errorf("metal backend: %w", ErrClosed)
	}
	return nil
}

// own returns v as a buffer or weight (T) of this backend that is not
// freed; what names its kind in the error.
func own[T interface {
	*metalBuf | *metalWeight
	mem() *engineMem
}](b *metalBackend, v any, what string) (T, error) {
	t, ok := v.(T)
	if !ok || t == nil || t.mem().be != b {
		return nil, fmt.Errorf("%w: metal: %s %T is not of this backend", ErrArgument, what, v)
	}
	if t.mem().m == nil {
		return nil, fmt.Errorf("%w: metal: %s freed", ErrArgument, what)
	}
	return t, nil
}

func (b *metalBackend) buf(v backend.Buf) (*metalBuf, error) { return own[*metalBuf](b, v, "buffer") }

func (b *metalBackend) weight(v backend.Weight) (*metalWeight, error) {
	return own[*metalWeight](b, v, "weight")
}

// floats views the first n f32 values of engine memory (engines' memory
// is aligned for f32, and every host the engines run on is little-endian).
func floats(m Mem, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(m.Bytes()))), n)
}

// f32Bytes views f32 values as their little-endian bytes.
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// hostCopy returns the memory of a buffer for a copy of n values to or from
// the host, once the queued work is done (op names the copy).
func (b *metalBackend) hostCopy(v backend.Buf, n int, op string) (Mem, error) {
	if err := b.live(); err != nil {
		return nil, err
	}
	mb, err := b.buf(v)
	if err != nil {
		return nil, err
	}
	if n > mb.n {
		return nil, fmt.Errorf("%w: metal: %s of %d values, buffer of %d", ErrArgument, op, n, mb.n)
	}
	if err := b.e.Sync(); err != nil {
		return nil, fmt.Errorf("metal: %s: %w", op, err)
	}
	return mb.m, nil
}

// Upload runs the queued work (which may still read dst), then copies src
// into dst's memory.
func (b *metalBackend) Upload(dst backend.Buf, src []float32) error {
	m, err := b.hostCopy(dst, len(src), "Upload")
	if err != nil {
		return err
	}
	copy(floats(m, len(src)), src)
	return nil
}

// Download runs the queued work, then copies from src's memory.
func (b *metalBackend) Download(src backend.Buf, dst []float32) error {
	m, err := b.hostCopy(src, len(dst), "Download")
	if err != nil {
		return err
	}
	copy(dst, floats(m, len(dst)))
	return nil
}

// Sync runs the queued work and returns its first error.
func (b *metalBackend) Sync() error {
	if err := b.live(); err != nil {
		return err
	}
	return b.e.Sync()
}

// Close runs the queued work and releases the scratch; the engine stays
// open. A second Close does nothing.
func (b *metalBackend) Close() error {
	if b.closed {
		return nil
	}
	err := b.e.Sync()
	b.freeScratch()
	b.pipes = nil
	b.closed = true
	if err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("metal backend: closing: %w", err)
	}
	return nil
}
