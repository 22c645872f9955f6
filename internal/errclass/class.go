package errclass

import "fmt"

// Class is the kind of an error a caller acts on. Classes are ordered by
// precedence: when an error tree holds several, Of returns the greatest.
type Class uint8

const (
	// Unclassified: any other failure.
	Unclassified Class = iota
	// IO: a file could not be read or written (*fs.PathError, a full disk).
	IO
	// Invalid: invalid or corrupt input (a source snapshot, a config, a pack,
	// a tokenizer, a parity reference).
	Invalid
	// Usage: the request itself is wrong (an unknown profile, format or
	// backend, conflicting options, an output that exists).
	Usage
	// Stale: the Hugging Face cache lacks a repo or revision, or a pinned
	// file is missing or changed.
	Stale
	// NoBackend: the compute backend cannot run on this machine.
	NoBackend
	// Interrupted: the work was canceled (context.Canceled: SIGINT, SIGTERM).
	Interrupted
)

var classNames = [...]string{
	Unclassified: "unclassified", IO: "io", Invalid: "invalid", Usage: "usage",
	Stale: "stale", NoBackend: "no_backend", Interrupted: "interrupted",
}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}
