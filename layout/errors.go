package layout

import (
	"fmt"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/internal/errclass"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrUnknownTensor: a tensor name matches no known pattern.
	ErrUnknownTensor = errclass.New(errclass.Invalid, "layout: unknown tensor")
	// ErrLocked: a --set override targets a class that is never quantized.
	ErrLocked = errclass.New(errclass.Usage, "layout: class is locked")
	// ErrTarget: a --set override names no known target.
	ErrTarget = errclass.New(errclass.Usage, "layout: unknown --set target")
	// ErrOverrideSyntax: a --set override is not of the form target=format.
	ErrOverrideSyntax = errclass.New(errclass.Usage, "layout: malformed --set override")
	// ErrProfile: an unknown profile name.
	ErrProfile = errclass.New(errclass.Usage, "layout: unknown profile")
	// ErrDims: a tensor's shape does not fit its resolved format. It wraps codecs.ErrDims.
	ErrDims = errclass.Wrap(errclass.Invalid, "layout: shape does not fit format", codecs.ErrDims)
	// ErrDuplicate: a tensor name or a --set target appears twice.
	ErrDuplicate = errclass.New(errclass.Invalid, "layout: duplicate")
	// ErrDuplicateSet: one --set target given two formats (a usage error; it
	// wraps ErrDuplicate).
	ErrDuplicateSet = errclass.Wrap(errclass.Usage, "layout: duplicate --set target", ErrDuplicate)
	// ErrConfig: config.json is malformed, misses a key or holds an out-of-range value.
	ErrConfig = errclass.New(errclass.Invalid, "layout: config.json")
	// ErrInventory: a checkpoint's tensors do not match its config.
	ErrInventory = errclass.New(errclass.Invalid, "layout: checkpoint does not match config")
)

// TensorError is one tensor refused by MakePlan: the tensor, its shape, the
// class and format it resolved to, the rule it breaks and, where one exists,
// the --set that fixes it. Err is the sentinel (ErrDims, ErrUnknownTensor,
// codecs.ErrShape, ...) that errors.Is matches.
type TensorError struct {
	Name   string
	Shape  []int64
	Class  Class
	Format codecs.Format
	Rule   string // what is wrong, e.g. "q4 needs the last dimension (33) to be a multiple of 32"
	Fix    string // e.g. "use --set experts=q8"; empty when there is none
	Err    error
}

func (e *TensorError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "layout: %s shape %v", e.Name, e.Shape)
	if e.Class != ClassInvalid {
		fmt.Fprintf(&b, " (%s", e.Class)
		if e.Format.Valid() {
			fmt.Fprintf(&b, ", %s", e.Format)
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Rule)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

func (e *TensorError) Unwrap() error { return e.Err }

// Mismatch is a tensor whose shape differs from the one the config implies.
type Mismatch struct {
	Name      string
	Want, Got []int64
}

// InventoryError lists every difference between a checkpoint's tensors and
// the tensors its config implies. It unwraps to ErrInventory.
type InventoryError struct {
	Missing    []string   // expected text tensors the checkpoint lacks
	Unexpected []string   // tensors that are neither expected text, accepted copies nor vision
	Duplicate  []string   // names listed more than once
	Mismatched []Mismatch // expected (or twin-copied) tensors with another shape
}

// Count is the number of findings.
func (e *InventoryError) Count() int {
	return len(e.Missing) + len(e.Unexpected) + len(e.Duplicate) + len(e.Mismatched)
}

func (e *InventoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "layout: checkpoint does not match config: %d problem(s)", e.Count())
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
	return b.String()
}

func (e *InventoryError) Unwrap() error { return ErrInventory }
