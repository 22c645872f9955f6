package model

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrBinding: a pack's tensors do not match the model its config.json
	// describes (missing, unexpected, misshapen or undecodable tensors), or
	// the config itself cannot be used.
	ErrBinding = errclass.New(errclass.Invalid, "model: weights do not bind to the model")
	// ErrInput: an argument of Prefill or Denoise is out of range (a token id
	// outside the vocabulary, an empty input, a logits buffer of the wrong
	// size).
	ErrInput = errclass.New(errclass.Invalid, "model: invalid input")
	// ErrCache: a cache was used with another model than the one that made
	// it, or would grow past the model's position limit.
	ErrCache = errors.New("model: invalid cache")
)

// ShapeMismatch is a tensor whose shape differs from the one the config
// implies.
type ShapeMismatch struct {
	Name      string
	Want, Got []int64
}

// BindError lists every reason a pack does not bind, so one error shows all
// of them. It unwraps to ErrBinding.
type BindError struct {
	Missing    []string        // text tensors the config implies that the pack lacks
	Unexpected []string        // tensors that are neither expected text, accepted tied copies nor vision
	Duplicate  []string        // names listed more than once
	Mismatched []ShapeMismatch // expected tensors with another shape
	Invalid    []string        // tensors whose format, dtype or byte size cannot be decoded, with the reason
}

// Count is the number of findings.
func (e *BindError) Count() int {
	return len(e.Missing) + len(e.Unexpected) + len(e.Duplicate) + len(e.Mismatched) + len(e.Invalid)
}

func (e *BindError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model: weights do not bind to the model: %d problem(s)", e.Count())
	for _, n := range e.Missing {
		fmt.Fprintf(&b, "\n  missing %s", n)
	}
	for _, n := range e.Unexpected {
		fmt.Fprintf(&b, "\n  unexpected %s", n)
	}
	for _, n := range e.Duplicate {
		fmt.Fprintf(&b, "\n  duplicate %s", n)
	}
	for _, m := range e.Mismatched {
		fmt.Fprintf(&b, "\n  shape %s: got %v, want %v", m.Name, m.Got, m.Want)
	}
	for _, s := range e.Invalid {
		fmt.Fprintf(&b, "\n  invalid %s", s)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrBinding) true.
func (e *BindError) Unwrap() error { return ErrBinding }

func inputErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInput}, args...)...)
}
