package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// Resident layout. A pack stores quantized tensors as the engine's
// interleaved blocks; the device keeps them planar, one array per kind of
// value (kernels.ResidentLayout: the layout relayout.kern writes and the
// common include's decoders read, shared with the Metal backend).
// UploadTensor copies a tensor's pack bytes to device staging in chunks of
// whole rows and re-lays each chunk there into the planes of the resident
// buffer.

// planeAlign is the alignment of every plane in a resident buffer.
const planeAlign = kernels.PlaneAlign

// planar is the resident layout of one tensor.
type planar struct{ kernels.Resident }

// planarLayout returns the resident layout of a tensor of format f, dtype dt
// and geometry m.
func planarLayout(f codecs.Format, dt codecs.DType, m codecs.Matrix) (planar, error) {
	r, err := kernels.ResidentLayout(f, dt, m)
	if err != nil {
		return planar{}, fmt.Errorf("cuda: %w", err)
	}
	return planar{r}, nil
}

// ptrs returns the plane addresses of a resident tensor at base, row planes
// advanced to row r0.
func (p planar) ptrs(base Ptr, r0 int64) [3]Ptr {
	var q [3]Ptr
	for i := range 3 {
		q[i] = base.Add(p.PlaneAt(i, r0))
	}
	return q
}

// PlaneOffsets returns the byte offsets, from the start of a resident tensor
// of format f, dtype dt and geometry m, of its planes in the order above
// (codes, then the formats' parameter planes; 0 for a plane the format does
// not have).
func PlaneOffsets(f codecs.Format, dt codecs.DType, m codecs.Matrix) ([3]int64, error) {
	p, err := planarLayout(f, dt, m)
	return p.Off, err
}

// decoder is a resident tensor as dgq_decode reads it: its format code, the
// bits of an affine format, its plane addresses and the rows of one of its
// matrices (nvfp4's matrix scales; 1 where unused).
type decoder struct {
	code, bits uint32
	p          [3]Ptr
	matRows    uint32
}

// decoderOf returns the decoder of a tensor of format f, dtype dt and
// geometry m resident at base (raw f32 also for a weight decoded at upload).
func decoderOf(f codecs.Format, dt codecs.DType, m codecs.Matrix, base Ptr) (decoder, error) {
	pl, err := planarLayout(f, dt, m)
	if err != nil {
		return decoder{}, err
	}
	return decoder{code: pl.Code, bits: pl.Bits, p: pl.ptrs(base, 0), matRows: uint32(pl.MatRows)}, nil
}

// ResidentSize is the size in bytes of the resident (planar) form of a
// tensor of format f, dtype dt and geometry m: what UploadTensor allocates
// (at least 4 bytes).
func ResidentSize(f codecs.Format, dt codecs.DType, m codecs.Matrix) (int64, error) {
	p, err := planarLayout(f, dt, m)
	if err != nil {
		return 0, err
	}
	return max(p.Size, 4), nil
}

// UploadTensor makes a stored tensor resident: it allocates its planar form
// (ResidentSize bytes), copies pack (the tensor's bytes in the pack format,
// EncodedSize of them) to device staging in chunks of whole rows and re-lays
// every chunk into the planes on the device (Relayout). Raw tensors are
// copied as they are. It returns once the buffer is complete.
func (o *Ops) UploadTensor(f codecs.Format, dt codecs.DType, m codecs.Matrix, pack []byte) (*Buffer, error) {
	p, err := planarLayout(f, dt, m)
	if err != nil {
		return nil, err
	}
	if int64(len(pack)) != p.Layout.Size() {
		return nil, fmt.Errorf("cuda: %s %s %d×%d tensor of %d bytes, want %d", f, dt, m.Rows, m.K, len(pack), p.Layout.Size())
	}
	if m.Rows > 1<<32-1 || m.K > 1<<31 {
		return nil, fmt.Errorf("cuda: %s tensor %d×%d not supported", f, m.Rows, m.K)
	}
	b, err := o.d.Alloc(max(p.Size, 4))
	if err != nil {
		return nil, err
	}
	if err := o.relayUpload(b.Ptr(), f, dt, m, p, pack); err != nil {
		b.Free()
		return nil, err
	}
	return b, nil
}

// relayUpload copies and re-lays pack into the resident buffer at dst.
func (o *Ops) relayUpload(dst Ptr, f codecs.Format, dt codecs.DType, m codecs.Matrix, p planar, pack []byte) error {
	if len(pack) == 0 {
		return nil
	}
	o.up.Lock()
	defer o.up.Unlock()
	chunk := o.chunkBytes()
	if f == codecs.Raw || m.Elements() == 0 {
		if f != codecs.Raw {
			return nil // nothing to decode (nvfp4 K = 0: headers only)
		}
		n := (int64(len(pack)) + chunk - 1) / chunk
		return o.transfer(int(n), chunk, func(i, _ int) ([]byte, Ptr) {
			s := int64(i) * chunk
			e := min(s+chunk, int64(len(pack)))
			return pack[s:e], dst.Add(s)
		}, nil)
	}
	// Rows per chunk: as many whole rows as fit (at least one; staging grows
	// to one row's span).
	rpc := max(chunk/max(p.Layout.RowBytes, 1), 1)
	// A chunk's span: its rows and the scale of every matrix starting there.
	need := max(chunk, rpc*p.Layout.RowBytes+p.Layout.HeaderBytes*((rpc-1)/p.MatRows+1))
	n := (m.Rows + rpc - 1) / rpc
	span := func(i int) (r0, rows, s, e int64) {
		r0 = int64(i) * rpc
		rows = min(rpc, m.Rows-r0)
		s, e = p.Layout.Span(r0, rows)
		return
	}
	return o.transfer(int(n), need, func(i, slot int) ([]byte, Ptr) {
		_, _, s, e := span(i)
		return pack[s:e], o.stage.dev[slot].Ptr()
	}, func(i, slot int) error {
		r0, rows, s, _ := span(i)
		return o.Relayout(dst, o.stage.dev[slot].Ptr(), f, dt, m, r0, rows, s)
	})
}

// Relayout queues the re-lay of rows [r0, r0+n) of a tensor of format f,
// dtype dt and geometry m from their pack bytes at src (the span
// Layout.Span(r0, n), which starts at byte base of the pack's tensor) into
// the planes of the resident tensor at dst (relayout.kern). Raw tensors have
// nothing to re-lay.
func (o *Ops) Relayout(dst, src Ptr, f codecs.Format, dt codecs.DType, m codecs.Matrix, r0, n, base int64) error {
	p, err := planarLayout(f, dt, m)
	if err != nil {
		return err
	}
	if r0 < 0 || n < 0 || r0 > m.Rows-n || m.Rows > 1<<32-1 || m.K > 1<<31 {
		return fmt.Errorf("cuda: re-lay of rows %d+%d of a %d×%d %s tensor", r0, n, m.Rows, m.K, f)
	}
	if f == codecs.Raw || n*m.K == 0 {
		return nil
	}
	q := p.ptrs(dst, r0)
	rows, k := uint32(n), uint32(m.K)
	switch f {
	case codecs.Q8:
		return o.stride("relayout.kern", "relayout_q8", n*m.K, src, q[0], q[1], rows, k)
	case codecs.NVFP4:
		return o.stride("relayout.kern", "relayout_nvfp4", n*p.Layout.RowBytes, src, q[0], q[1], q[2], rows, k, uint32(r0),
			uint32(p.MatRows), uint64(base))
	default: // Q4, Q5, Q6
		return o.stride("relayout.kern", "relayout_affine", n*p.Row[0], src, q[0], q[1], q[2], rows, k, uint32(f.Bits()))
	}
}

// Upload staging. Chunks travel through two pinned host buffers (filled by
// parallel copies, so that the host copy of one chunk overlaps the DMA of
// the previous one) into two device staging buffers; where pinned memory
// cannot be had (or SetUploadChunk turned it off), each chunk is copied
// straight from the caller's memory (the driver stages pageable memory
// itself).

// defaultChunk is the staging chunk of an upload.
const defaultChunk = 64 << 20

type staging struct {
	size  int64
	dev   [2]*Buffer
	host  [2]uintptr // pinned host memory (0: pageable uploads)
	noPin bool       // pinned memory refused, or not wanted
}

// chunkBytes is the upload chunk (Ops.SetUploadChunk, else 64 MiB).
func (o *Ops) chunkBytes() int64 {
	if o.chunk > 0 {
		return o.chunk
	}
	return defaultChunk
}

// SetUploadChunk sets the bytes of pack data UploadTensor moves per chunk
// (0: the default, 64 MiB) and whether it stages through pinned host memory;
// tests use small chunks to cross chunk boundaries.
func (o *Ops) SetUploadChunk(bytes int64, pinned bool) error {
	o.up.Lock()
	defer o.up.Unlock()
	o.chunk = bytes
	if err := o.freeStaging(); err != nil {
		return err
	}
	o.stage.noPin = !pinned
	return nil
}

// UploadPinned reports whether uploads stage through pinned host memory
// (known after the first upload).
func (o *Ops) UploadPinned() bool {
	o.up.Lock()
	defer o.up.Unlock()
	return o.stage.host[0] != 0
}

// ensureStaging makes the staging buffers at least size bytes.
func (o *Ops) ensureStaging(size int64) error {
	st := &o.stage
	if st.size >= size && st.dev[0] != nil {
		return nil
	}
	noPin := st.noPin
	if err := o.freeStaging(); err != nil {
		return err
	}
	st.noPin = noPin
	for i := range st.dev {
		b, err := o.d.Alloc(size)
		if err != nil {
			o.freeStaging()
			return err
		}
		st.dev[i] = b
	}
	if !st.noPin {
		for i := range st.host {
			p, err := o.d.allocHost(size)
			if err != nil {
				// Pinned memory refused: pageable uploads from now on.
				for j := range i {
					o.d.freeHost(st.host[j])
					st.host[j] = 0
				}
				st.noPin = true
				break
			}
			st.host[i] = p
		}
	}
	st.size = size
	return nil
}

// freeStaging releases the staging buffers.
func (o *Ops) freeStaging() error {
	st := &o.stage
	var first error
	for i := range st.dev {
		if st.dev[i] != nil {
			if err := st.dev[i].Free(); err != nil && first == nil {
				first = err
			}
			st.dev[i] = nil
		}
		if st.host[i] != 0 {
			if err := o.d.freeHost(st.host[i]); err != nil && first == nil {
				first = err
			}
			st.host[i] = 0
		}
	}
	st.size = 0
	return first
}

// transfer moves n pieces of host memory to the device in order: piece i
// (src, dst = get(i, slot), len(src) ≤ size) lands at dst, then after(i,
// slot) is queued (nil: nothing), and may read it. slot (0 or 1) alternates;
// a piece staged in device slot s stays there until piece i+2 is fetched.
// It returns once everything has landed and every after has run.
func (o *Ops) transfer(n int, size int64, get func(i, slot int) ([]byte, Ptr), after func(i, slot int) error) error {
	if err := o.ensureStaging(size); err != nil {
		return err
	}
	st := &o.stage
	for i := range n {
		slot := i & 1
		src, dst := get(i, slot)
		if st.host[0] != 0 {
			// The DMA of piece i−2 from this host slot finished at the
			// Sync of piece i−1; fill it while piece i−1 travels.
			parallelCopy(hostBytes(st.host[slot], len(src)), src)
			if err := o.d.Sync(); err != nil {
				return err
			}
			if err := o.d.copyHtoDAsync(dst, st.host[slot], int64(len(src))); err != nil {
				return err
			}
		} else {
			// Pageable: the copy waits for itself and for everything queued
			// before it (so the staging slot is free again).
			b := &Buffer{d: o.d, ptr: dst, size: int64(len(src))}
			if err := b.Upload(src); err != nil {
				return err
			}
		}
		if after != nil {
			if err := after(i, slot); err != nil {
				return err
			}
		}
	}
	return o.d.Sync()
}

// hostBytes views n bytes of pinned host memory at p.
func hostBytes(p uintptr, n int) []byte {
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	return unsafe.Slice((*byte)(base), n)
}

// parallelCopy copies src into dst (same length) on several goroutines.
func parallelCopy(dst, src []byte) {
	const piece = 4 << 20
	w := min(runtime.GOMAXPROCS(0), 8, (len(src)+piece-1)/piece)
	if w <= 1 {
		copy(dst, src)
		return
	}
	per := (len(src) + w - 1) / w
	var wg sync.WaitGroup
	for s := 0; s < len(src); s += per {
		e := min(s+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[s:e], src[s:e])
		}()
	}
	wg.Wait()
}

// allocHost allocates page-locked host memory (cuMemAllocHost).
func (d *Device) allocHost(n int64) (uintptr, error) {
	var p uintptr
	err := d.do(func() error {
		return check("cuMemAllocHost_v2", ccall(drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n)))
	})
	return p, err
}

// freeHost releases memory of allocHost after the queued work.
func (d *Device) freeHost(p uintptr) error {
	return d.afterStream("cuMemFreeHost", drv.cuMemFreeHost, p)
}

// copyHtoDAsync queues a copy of n bytes of pinned host memory at src to dst.
func (d *Device) copyHtoDAsync(dst Ptr, src uintptr, n int64) error {
	return d.do(func() error {
		return check("cuMemcpyHtoDAsync_v2", ccall(drv.cuMemcpyHtoDAsync, uintptr(dst), src, uintptr(n), d.stream))
	})
}
