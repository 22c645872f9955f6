package session

import (
	"strings"
	"time"
	"unicode/utf8"
)

// ReplyChunk is what one committed block adds to the reply
// (RunOptions.Stream).
type ReplyChunk struct {
	// Block is the 0-based index of the block just committed; on the last
	// chunk of an interrupted run, the number of committed blocks.
	Block int
	// Text is the reply's new text: the decoded reply so far less what
	// earlier chunks gave. It is valid UTF-8 except where the model made
	// invalid byte sequences (each byte then decodes as U+FFFD, as the
	// tokenizer's byte fallback does); a trailing run of U+FFFD, which the
	// next block may complete into a character, is held back until then.
	Text string
	// Tokens is the new tokens committed so far (every block in full), Steps
	// the denoising steps so far, over all blocks.
	Tokens, Steps int
	// Last is true on the final chunk: the reply ended (an EOS, or the
	// length limit), or the run was interrupted.
	Last bool
	// Elapsed is the time since the generation started.
	Elapsed time.Duration
}

// replyStream decodes a reply block by block (RunOptions.Stream). The
// tokenizer's decoders map each token on its own except the byte fallback,
// which decodes a run of byte tokens as one UTF-8 sequence, or as one
// U+FFFD per byte when the run is not valid UTF-8: so the decoded reply
// grows by appending, except that a trailing run of U+FFFD may become a
// character once the next block completes its bytes. It is held back.
type replyStream struct {
	s      *Session
	tokens []int  // the blocks committed so far
	shown  string // the text given out
}

// add records a committed block and returns the text it adds; last gives
// out everything.
func (r *replyStream) add(block []int, last bool) string {
	r.tokens = append(r.tokens, block...)
	full := r.s.Tokenizer.Decode(r.s.ReplyTokens(r.tokens), true)
	if !last {
		full = strings.TrimRight(full, string(utf8.RuneError))
	}
	if !strings.HasPrefix(full, r.shown) {
		// Only a held-back run can change, so this does not happen; should a
		// decoder break the rule, what was shown stays and the rest follows.
		n := 0
		for n < len(full) && n < len(r.shown) && full[n] == r.shown[n] {
			n++
		}
		r.shown = r.shown[:n]
	}
	text := full[len(r.shown):]
	r.shown = full
	return text
}
