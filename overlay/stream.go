package overlay

import (
	"context"
	"fmt"
	"io"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/zeebo/blake3"
)

// streamChunk is the size of one positional read.
const streamChunk = 8 << 20

// streamer reads tensors through one reusable buffer.
type streamer struct{ buf []byte }

func newStreamer() *streamer { return &streamer{buf: make([]byte, streamChunk)} }

// stream reads size bytes at off of r in chunks, hands each to fn, and,
// when hash is set, returns the BLAKE3 digest of the whole, checked against
// want unless want is empty (a mismatch is dgq.ErrInvalid). A tensor without
// a digest (the engine records none) gets the one computed here.
func (s *streamer) stream(ctx context.Context, r io.ReaderAt, off, size int64, want string, hash bool, fn func([]byte) error) (string, error) {
	var h *blake3.Hasher
	if hash {
		h = blake3.New()
	}
	for pos := int64(0); pos < size; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		chunk := s.buf[:min(int64(len(s.buf)), size-pos)]
		if err := readFull(r, chunk, off+pos); err != nil {
			return "", fmt.Errorf("read at %d: %w", off+pos, err)
		}
		if h != nil {
			h.Write(chunk)
		}
		if err := fn(chunk); err != nil {
			return "", err
		}
		pos += int64(len(chunk))
	}
	if h == nil {
		return "", nil
	}
	got := fmt.Sprintf("%x", h.Sum(nil))
	if want != "" && got != want {
		return "", fmt.Errorf("%w: content does not match its digest (run dgq audit)", dgq.ErrInvalid)
	}
	return got, nil
}
