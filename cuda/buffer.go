package cuda

import (
	"fmt"
	"unsafe"
)

// Ptr is a device address (CUdeviceptr). It is passed to kernels as a
// pointer argument.
type Ptr uint64

// Add returns p advanced by off bytes.
func (p Ptr) Add(off int64) Ptr { return Ptr(int64(p) + off) }

// Buffer is a device allocation.
type Buffer struct {
	d    *Device
	ptr  Ptr
	size int64
}

// Alloc allocates bytes of device memory (cuMemAlloc; not managed memory).
func (d *Device) Alloc(bytes int64) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: Alloc of %d bytes", bytes)
	}
	b := &Buffer{d: d, size: bytes}
	err := d.do(func() error {
		return check("cuMemAlloc_v2", ccall(drv.cuMemAlloc, uintptr(unsafe.Pointer(&b.ptr)), uintptr(bytes)))
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Ptr is the buffer's device address.
func (b *Buffer) Ptr() Ptr { return b.ptr }

// Size is the buffer's size in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Free releases the allocation after the work queued on the device's stream.
func (b *Buffer) Free() error {
	if b.ptr == 0 {
		return nil
	}
	err := b.d.afterStream("cuMemFree_v2", drv.cuMemFree, uintptr(b.ptr))
	b.ptr = 0
	return err
}

func (b *Buffer) span(off int64, n int) error {
	if b.ptr == 0 {
		return fmt.Errorf("cuda: buffer freed")
	}
	if off < 0 || int64(n) > b.size-off || off > b.size {
		return fmt.Errorf("cuda: %d bytes at offset %d outside a buffer of %d", n, off, b.size)
	}
	return nil
}

// Upload copies src to the start of the buffer; it returns once the copy is
// done.
func (b *Buffer) Upload(src []byte) error { return b.UploadAt(0, src) }

// UploadAt copies src to the buffer at byte offset off, in stream order, and
// waits for it.
func (b *Buffer) UploadAt(off int64, src []byte) error {
	if err := b.span(off, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return b.d.do(func() error {
		if err := check("cuMemcpyHtoDAsync_v2", ccall(drv.cuMemcpyHtoDAsync, uintptr(b.ptr.Add(off)), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)), b.d.stream)); err != nil {
			return err
		}
		return check("cuStreamSynchronize", ccall(drv.cuStreamSynchronize, b.d.stream))
	})
}

// Download copies the start of the buffer into dst once the work queued
// before it has finished.
func (b *Buffer) Download(dst []byte) error { return b.DownloadAt(0, dst) }

// DownloadAt copies len(dst) bytes from byte offset off into dst.
func (b *Buffer) DownloadAt(off int64, dst []byte) error {
	if err := b.span(off, len(dst)); err != nil || len(dst) == 0 {
		return err
	}
	return b.d.toHost(dst, b.ptr.Add(off))
}

// toHost copies len(dst) bytes at device address p into dst once the work
// queued before it has finished.
func (d *Device) toHost(dst []byte, p Ptr) error {
	return d.do(func() error {
		if err := check("cuMemcpyDtoHAsync_v2", ccall(drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(p), uintptr(len(dst)), d.stream)); err != nil {
			return err
		}
		return check("cuStreamSynchronize", ccall(drv.cuStreamSynchronize, d.stream))
	})
}

// Zero fills the buffer with zero bytes (queued on the stream).
func (b *Buffer) Zero() error {
	if err := b.span(0, 0); err != nil {
		return err
	}
	return b.d.do(func() error {
		return check("cuMemsetD8Async", ccall(drv.cuMemsetD8Async, uintptr(b.ptr), 0, uintptr(b.size), b.d.stream))
	})
}

// CopyFrom queues a device-to-device copy of n bytes from src at srcOff to b
// at off.
func (b *Buffer) CopyFrom(off int64, src *Buffer, srcOff, n int64) error {
	if err := b.span(off, int(n)); err != nil {
		return err
	}
	if err := src.span(srcOff, int(n)); err != nil {
		return err
	}
	return b.d.do(func() error {
		return check("cuMemcpyDtoDAsync_v2", ccall(drv.cuMemcpyDtoDAsync, uintptr(b.ptr.Add(off)), uintptr(src.ptr.Add(srcOff)), uintptr(n), b.d.stream))
	})
}

// Bytes views a slice of fixed-size values as bytes (for Upload/Download of
// []float32, []uint16 and the like).
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
