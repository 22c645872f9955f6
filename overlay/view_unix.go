//go:build unix

package overlay

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reserve maps size bytes of anonymous, zeroed, page-aligned memory.
func reserve(size int64) ([]byte, func([]byte) error, error) {
	if size == 0 {
		return []byte{}, func([]byte) error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("overlay: a %d-byte view cannot be mapped on this platform", size)
	}
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("overlay: reserve %d bytes: %w", size, err)
	}
	return b, unix.Munmap, nil
}

// mapTail replaces view[split:] with a read-only shared mapping of the local
// blob from localSplit: file-backed, clean and evictable, never copied. Both
// offsets must be page aligned (16 KiB multiples are, on every page size up
// to 16 KiB); otherwise the caller copies instead.
func mapTail(view []byte, local *os.File, localSplit, split int64) error {
	page := int64(os.Getpagesize())
	if split%page != 0 || localSplit%page != 0 || split >= int64(len(view)) {
		return fmt.Errorf("overlay: tail offsets not page aligned")
	}
	n := uintptr(int64(len(view)) - split)
	_, err := unix.MmapPtr(int(local.Fd()), localSplit, unsafe.Pointer(&view[split]), n, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_FIXED)
	return err
}

// protect makes the gathered head read-only.
func protect(head []byte) {
	page := os.Getpagesize()
	if n := len(head) / page * page; n > 0 {
		_ = unix.Mprotect(head[:n], unix.PROT_READ)
	}
}
