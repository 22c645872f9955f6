package hfcache

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// FileHeaderDigest returns the sha256 of a safetensors file's header (the
// 8-byte length prefix and the JSON header, as HeaderDigest) and the file's
// size, reading only the header. It pins a shard without reading its payload.
func FileHeaderDigest(path string) (digest string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	var prefix [8]byte
	if _, err := io.ReadFull(f, prefix[:]); err != nil {
		return "", st.Size(), fail(ErrSafetensors, path, "cannot read the 8-byte header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > MaxHeaderBytes || int64(n) > st.Size()-8 {
		return "", st.Size(), fail(ErrSafetensors, path, "header length %d exceeds the file (%d bytes) or the %d-byte limit", n, st.Size(), MaxHeaderBytes)
	}
	buf := make([]byte, 8+n)
	copy(buf, prefix[:])
	if _, err := io.ReadFull(f, buf[8:]); err != nil {
		return "", st.Size(), fmt.Errorf("hfcache: read header of %s: %w", path, err)
	}
	d, err := HeaderDigest(buf)
	return d, st.Size(), err
}
