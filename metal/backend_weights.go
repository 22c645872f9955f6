package metal

import (
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// Weights in engine memory: the resident (planar) layout of
// kernels.ResidentLayout, re-laid on the engine at upload (relayout.kern)
// from the pack's blocks, which travel through a staging buffer in chunks of
// whole rows.

// uploadChunk is the pack bytes staged per re-lay step.
const uploadChunk = 64 << 20

// decoder is a resident weight as the kernels read it: dgq_decode's format
// code and bits, and the plane layout.
type decoder struct {
	res kernels.Resident
}

// planes returns the arguments of a weight's three planes in m from row r0
// (a plane the format lacks: the buffer's start, never read).
func (d decoder) planes(m Mem, r0 int64) [3]Arg {
	var a [3]Arg
	for i := range 3 {
		a[i] = memArg(m, d.res.PlaneAt(i, r0))
	}
	return a
}

// UploadWeight makes a stored tensor resident in its stored format, re-laid
// into planes; it returns once the weight is complete (the engine synced).
func (b *metalBackend) UploadWeight(t backend.TensorData) (backend.Weight, error) {
	if err := b.live(); err != nil {
		return nil, err
	}
	g, err := t.Matrix()
	if err != nil {
		return nil, err
	}
	f, dt, pack := t.Format, t.DType, t.Bytes
	res, err := kernels.ResidentLayout(f, dt, g)
	if errors.Is(err, kernels.ErrNoDecoder) {
		// No decoder on the engine: decoded on the host, kept as f32.
		v := make([]float32, g.Elements())
		if err := codecs.DecodeRows(f, dt, g, t.Bytes, 0, g.Rows, v); err != nil {
			return nil, fmt.Errorf("metal: tensor %q: %w", t.Name, err)
		}
		pack = f32Bytes(v)
		res, err = kernels.ResidentLayout(codecs.Raw, codecs.F32, g)
	}
	if err != nil {
		return nil, fmt.Errorf("metal: tensor %q: %w", t.Name, err)
	}
	if int64(len(pack)) != res.Layout.Size() {
		return nil, fmt.Errorf("%w: metal: tensor %q: %s %s %d×%d of %d bytes, want %d", ErrArgument, t.Name, f, dt, g.Rows, g.K, len(pack), res.Layout.Size())
	}
	if _, err := u32Of(g.Rows, "rows"); err != nil {
		return nil, fmt.Errorf("metal: tensor %q: %w", t.Name, err)
	}
	if _, err := u32Of(g.K, "width"); err != nil {
		return nil, fmt.Errorf("metal: tensor %q: %w", t.Name, err)
	}
	m, err := b.e.Alloc(int(max(res.Size, 4)))
	if err != nil {
		return nil, fmt.Errorf("metal: tensor %q: %w", t.Name, err)
	}
	w := &metalWeight{engineMem: engineMem{be: b, m: m}, f: t.Format, dt: t.DType, geom: g, dec: decoder{res: res}}
	if err := b.relay(w, pack); err != nil {
		m.Free()
		return nil, fmt.Errorf("metal: tensor %q: %w", t.Name, err)
	}
	return w, nil
}

// relay fills a new weight's memory from its pack bytes: raw bytes are
// copied as they are (no queued work can touch new memory); the others are
// staged in chunks of whole rows and re-laid on the engine, each chunk
// after the engine finished with the one before.
func (b *metalBackend) relay(w *metalWeight, pack []byte) error {
	res := w.dec.res
	if res.Code <= kernels.FmtF16 { // raw
		copy(w.m.Bytes(), pack)
		return nil
	}
	if w.geom.Elements() == 0 {
		return nil // nothing to decode (nvfp4 of K = 0: headers only)
	}
	l := res.Layout
	rpc := max(int64(b.chunk)/max(l.RowBytes, 1), 1) // rows per chunk
	for r0 := int64(0); r0 < w.geom.Rows; r0 += rpc {
		n := min(rpc, w.geom.Rows-r0)
		s, e := l.Span(r0, n)
		if err := b.e.Sync(); err != nil { // the staging buffer is free again
			return err
		}
		stage, err := b.scratchMem(scrStage, e-s)
		if err != nil {
			return err
		}
		copy(stage.Bytes(), pack[s:e])
		if err := b.relayRows(w, stage, r0, n, s); err != nil {
			return err
		}
	}
	return b.e.Sync()
}

// relayRows queues the re-lay of rows r0 … r0+n−1 of w from their pack
// bytes in src (the span that starts at byte base of the tensor).
func (b *metalBackend) relayRows(w *metalWeight, src Mem, r0, n, base int64) error {
	res := w.dec.res
	p := w.dec.planes(w.m, r0)
	rows, k := uint32(n), uint32(w.geom.K)
	switch res.Code {
	case kernels.FmtQ8:
		return b.stride("relayout.kern", "relayout_q8", n*w.geom.K, memArg(src, 0), p[0], p[1], u32Arg(rows), u32Arg(k))
	case kernels.FmtNVFP4:
		// The matrix scales are indexed by absolute matrix: plane 2 at matrix 0.
		return b.stride("relayout.kern", "relayout_nvfp4", n*res.Layout.RowBytes, memArg(src, 0), p[0], p[1],
			memArg(w.m, res.Off[2]), u32Arg(rows), u32Arg(k), u32Arg(uint32(r0)), u32Arg(uint32(res.MatRows)), u64Arg(uint64(base)))
	default: // q4, q5, q6
		return b.stride("relayout.kern", "relayout_affine", n*res.Row[0], memArg(src, 0), p[0], p[1], p[2],
			u32Arg(rows), u32Arg(k), u32Arg(res.Bits))
	}
}

// dequant queues the decoding of the whole of w into out (Rows·K f32
// values from its start), bit-exact with codecs.DecodeRows: the
// whole-tensor decoders of dequant.kern.
func (b *metalBackend) dequant(out Arg, w *metalWeight) error {
	res := w.dec.res
	count := w.geom.Elements()
	if count == 0 {
		return nil
	}
	p := w.dec.planes(w.m, 0)
	rows, k := uint32(w.geom.Rows), uint32(w.geom.K)
	switch res.Code {
	case kernels.FmtF32:
		return b.stride("copy.metal", "copy_u32", count, out, p[0], u64Arg(uint64(count)))
	case kernels.FmtBF16:
		return b.stride("dequant.kern", "widen_bf16_f32", count, p[0], out, u64Arg(uint64(count)))
	case kernels.FmtF16:
		return b.stride("dequant.kern", "widen_f16_f32", count, p[0], out, u64Arg(uint64(count)))
	case kernels.FmtQ8:
		return b.stride("dequant.kern", "dequant_q8_f32", count, p[0], p[1], out, u32Arg(rows), u32Arg(k))
	case kernels.FmtNVFP4: // one thread per code byte (two values)
		return b.stride("dequant.kern", "dequant_nvfp4_f32", count/2, p[0], p[1], p[2], out, u32Arg(rows), u32Arg(k),
			u32Arg(0), u32Arg(uint32(res.MatRows)))
	}
	if res.Bits == 4 { // one thread per code byte
		return b.stride("dequant.kern", "dequant_q4_f32", count/2, p[0], p[1], p[2], out, u32Arg(rows), u32Arg(k))
	}
	return b.stride("dequant.kern", "dequant_affine_f32", count, p[0], p[1], p[2], out, u32Arg(rows), u32Arg(k), u32Arg(res.Bits))
}

// decodeArgs are the arguments through which a kernel reads w with
// dgq_decode: its three planes, then (separately) its format code, bits
// and rows per matrix.
func (w *metalWeight) decodeArgs() (planes [3]Arg, code, bits, matRows Arg) {
	res := w.dec.res
	return w.dec.planes(w.m, 0), u32Arg(res.Code), u32Arg(res.Bits), u32Arg(uint32(res.MatRows))
}
