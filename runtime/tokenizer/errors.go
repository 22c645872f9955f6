package tokenizer

import (
	"fmt"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Sentinel errors. Every error returned by this package starts with
// "tokenizer: " and wraps one of these, so callers can test the kind with
// errors.Is.
var (
	// ErrFormat reports a tokenizer.json (or tokenizer_config.json) that is
	// not well formed: bad JSON, a missing or ill-typed field, an id out of
	// range, a merge naming a token absent from the vocabulary, ...
	ErrFormat = errclass.New(errclass.Invalid, "malformed tokenizer file")

	// ErrUnsupported reports a well-formed file that uses a component type,
	// or a setting of a component, that this package does not implement.
	// The message names the component.
	ErrUnsupported = errclass.New(errclass.Invalid, "unsupported tokenizer component")

	// ErrTooLarge reports an input above MaxFileSize.
	ErrTooLarge = errclass.New(errclass.Invalid, "tokenizer file too large")

	// ErrMissing reports a path that does not exist, or a directory without
	// a tokenizer.json: invalid input, as a missing pack is (an unreadable
	// file that exists stays an I/O error).
	ErrMissing = errclass.New(errclass.Invalid, "no tokenizer file")
)

// MaxFileSize bounds the size of a tokenizer.json that Load accepts.
const MaxFileSize = 256 << 20

func formatErr(format string, args ...any) error {
	return fmt.Errorf("tokenizer: %w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

func unsupportedErr(format string, args ...any) error {
	return fmt.Errorf("tokenizer: %w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}
