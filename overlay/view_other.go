//go:build !unix

package overlay

import (
	"errors"
	"os"
	"unsafe"
)

// reserve allocates a 64-byte-aligned buffer where mmap is unavailable.
func reserve(size int64) ([]byte, func([]byte) error, error) {
	buf := make([]byte, size+64)
	off := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64
	return buf[off : off+int(size)], func([]byte) error { return nil }, nil
}

func mapTail([]byte, *os.File, int64, int64) error { return errors.New("overlay: no mmap") }

func protect([]byte) {}
