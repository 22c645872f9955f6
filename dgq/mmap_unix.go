//go:build unix

package dgq

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of f read-only. A zero-length file maps to nil.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("dgq: %s: %d bytes cannot be mapped on this platform", f.Name(), size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("dgq: mmap %s: %w", f.Name(), err)
	}
	return b, nil
}

func unmapFile(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}

// adviseSequential hints that b is about to be read once, front to back.
func adviseSequential(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_SEQUENTIAL)
	}
}
