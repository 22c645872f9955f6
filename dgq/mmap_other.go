//go:build !unix

package dgq

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the file into memory where mmap is unavailable.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if int64(int(size)) != size {
		return nil, fmt.Errorf("dgq: %s: %d bytes cannot be read on this platform", f.Name(), size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, fmt.Errorf("dgq: read %s: %w", f.Name(), err)
	}
	return b, nil
}

func unmapFile([]byte) error { return nil }

func adviseSequential([]byte) {}
