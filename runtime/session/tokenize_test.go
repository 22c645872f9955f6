package session

import (
	"errors"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// TestTokenizeRefusesInvalidUTF8: a text that is not UTF-8 is a usage error
// naming the first bad byte, before any tokenizer is read.
func TestTokenizeRefusesInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		text   string
		offset string
	}{
		{"\xff", "offset 0"},
		{"ok \xc3(", "offset 3"},
		{"héllo\xed\xa0\x80", "offset 6"}, // a UTF-16 surrogate encoded
	} {
		_, _, err := Tokenize("no-such-tokenizer.json", c.text)
		if !errors.Is(err, ErrNotUTF8) || errclass.Of(err) != errclass.Usage || !strings.Contains(err.Error(), c.offset) {
			t.Errorf("Tokenize(%q) = %v; want ErrNotUTF8 at %s", c.text, err, c.offset)
		}
	}
}
