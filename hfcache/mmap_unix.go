//go:build unix

package hfcache

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f read-only. A zero-length file
// cannot be mapped and yields an empty, unmapped slice.
func mapFile(f *os.File, size int64) (data []byte, mapped bool, err error) {
	if size == 0 {
		return []byte{}, false, nil
	}
	if int64(int(size)) != size || size < 0 {
		return nil, false, fmt.Errorf("%d bytes cannot be mapped on this platform", size)
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, false, fmt.Errorf("mmap: %w", err)
	}
	return data, true, nil
}

func unmapFile(data []byte) error {
	return unix.Munmap(data)
}

func pageSize() int64 { return int64(unix.Getpagesize()) }

// advise applies madvise to data, which starts on a page boundary.
// Failures only cost memory or read-ahead, never correctness, so they are
// ignored.
func advise(data []byte, dontNeed bool) {
	if len(data) == 0 {
		return
	}
	adv := unix.MADV_WILLNEED
	if dontNeed {
		adv = unix.MADV_DONTNEED
	}
	_ = unix.Madvise(data, adv)
}
