//go:build !unix

package hfcache

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the whole file into memory: this platform has no mmap path
// here, so OpenSnapshot reads every shard in full.
func mapFile(f *os.File, size int64) (data []byte, mapped bool, err error) {
	if int64(int(size)) != size || size < 0 {
		return nil, false, fmt.Errorf("%d bytes cannot be read into memory on this platform", size)
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, false, fmt.Errorf("read: %w", err)
	}
	return data, false, nil
}

func unmapFile([]byte) error { return nil }

func pageSize() int64 { return int64(os.Getpagesize()) }

// advise is a no-op: the data is ordinary heap memory.
func advise([]byte, bool) {}
