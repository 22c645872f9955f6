package metal

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// deviceMem is a Metal buffer the engine made: a Shared buffer (Alloc) or a
// no-copy buffer over host bytes (Wrap). It owns its MTLBuffer (+1).
type deviceMem struct {
	e   *DeviceEngine
	buf objc.ID // owned MTLBuffer; 0 once freed
	b   []byte  // the contents as the host sees them
}

// Bytes is the buffer's contents (nil once freed). A Shared buffer's bytes
// are Metal's contents pointer; a wrapped buffer's are the wrapped slice.
func (m *deviceMem) Bytes() []byte { return m.b }

// Free releases the buffer. Work already queued on it keeps it alive until
// that work is done (command buffers retain the buffers they use), but a
// wrapped buffer's host bytes must stay mapped until then: free it after a
// Sync. A second Free does nothing.
func (m *deviceMem) Free() {
	if m.buf == 0 {
		return
	}
	_ = inPool(func() error { release(m.buf); return nil })
	delete(m.e.mems, m)
	m.buf, m.b = 0, nil
}

// Alloc returns a zeroed Shared-storage buffer of n bytes (CPU and GPU see
// the same memory on Apple silicon). n must fit the device's
// maxBufferLength (ErrBufferLimit). Metal does not document a new buffer's
// contents, so Alloc clears them.
func (e *DeviceEngine) Alloc(n int) (Mem, error) {
	if e.closed {
		return nil, ErrClosed
	}
	length, err := checkAlloc(n, e.caps.MaxBufferLength)
	if err != nil {
		return nil, err
	}
	m := &deviceMem{e: e}
	err = inPool(func() error {
		// newBufferWithLength:options: is a new… method: the buffer is +1.
		buf := e.dev.Send(sel.newBufferWithLength, uint(length), uint(mtlResourceStorageModeShared))
		if buf == 0 {
			return fmt.Errorf("%w: %d bytes on %s", ErrAlloc, length, e.caps.Name)
		}
		p := objc.Send[unsafe.Pointer](buf, sel.contents)
		if p == nil { // not for Shared storage; checked rather than dereferenced
			release(buf)
			return fmt.Errorf("%w: a buffer of %d bytes with no contents on %s", ErrAlloc, length, e.caps.Name)
		}
		m.buf, m.b = buf, unsafe.Slice((*byte)(p), length)[:n:n]
		clear(m.b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.mems[m] = struct{}{}
	return m, nil
}

// Wrap returns a no-copy Shared buffer over b: Metal reads (and the kernels
// may only read) b's memory in place. b must start on a page boundary
// (ErrUnaligned; 16 KiB on Apple silicon: a mapped file's start and a pack's
// expert_split are), and its length rounded up to a whole page must fit the
// device's maxBufferLength (ErrBufferLimit, which names the limit): the
// wrapped length is rounded up because Metal wants whole pages, which is
// safe since the page holding b's last byte is mapped to its end
// (wrapLength).
//
// b must be memory Go's garbage collector does not manage — a mapping such
// as the pack's mmapped blob — since Metal keeps its address: the caller
// keeps it mapped and unchanged until the Mem is freed and the work using
// it is done. The buffer is made with a nil deallocator: freeing it never
// unmaps b.
func (e *DeviceEngine) Wrap(b []byte) (Mem, error) {
	if e.closed {
		return nil, ErrClosed
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	length, err := wrapLength(uintptr(p), len(b), e.caps.PageSize, e.caps.MaxBufferLength)
	if err != nil {
		return nil, err
	}
	m := &deviceMem{e: e, b: b}
	err = inPool(func() error {
		// newBufferWithBytesNoCopy:length:options:deallocator: (new…: +1);
		// deallocator nil: Metal never frees or unmaps the memory.
		buf := lib.noCopy(e.dev, sel.newBufferWithBytesNoCopy, p, uint(length), uint(mtlResourceStorageModeShared), 0)
		if buf == 0 {
			return fmt.Errorf("%w: no-copy buffer of %d bytes refused by %s", ErrAlloc, length, e.caps.Name)
		}
		m.buf = buf
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.mems[m] = struct{}{}
	return m, nil
}

// ownMem returns a as this engine's live buffer, or an ErrForeign error.
func (e *DeviceEngine) ownMem(i int, a Mem) (*deviceMem, error) {
	m, ok := a.(*deviceMem)
	switch {
	case !ok || m.e != e:
		return nil, fmt.Errorf("%w: argument %d is a buffer of another engine", ErrForeign, i)
	case m.buf == 0:
		return nil, fmt.Errorf("%w: argument %d is a freed buffer", ErrForeign, i)
	}
	return m, nil
}
