package errclass

import (
	"context"
	"errors"
	"io/fs"
)

// Classed is implemented by errors that carry a class: the sentinels New and
// Wrap make, and any error type that wants a class of its own.
type Classed interface {
	error
	Class() Class
}

// sentinel is an error value of a class; errors.Is matches it by identity
// (and, through Unwrap, the error it wraps, if any).
type sentinel struct {
	text  string
	class Class
	wraps error
}

func (e *sentinel) Error() string { return e.text }
func (e *sentinel) Class() Class  { return e.class }
func (e *sentinel) Unwrap() error { return e.wraps }

// New returns a sentinel of class c whose Error() is text, as errors.New
// would: each call makes a distinct value.
func New(c Class, text string) error {
	return &sentinel{text: text, class: c}
}

// Wrap returns a sentinel of class c whose Error() is text and that also
// matches err under errors.Is and errors.As (a more specific sentinel of a
// general one). Its class is the greater of c and err's (see Of).
func Wrap(c Class, text string, err error) error {
	return &sentinel{text: text, class: c, wraps: err}
}

// Of returns the class of err: the greatest class found anywhere in its tree
// (every error reached through Unwrap() error and Unwrap() []error, the
// branches of errors.Join included). An error contributes the class of its
// Class method; context.Canceled (under errors.Is) counts as Interrupted and
// an *fs.PathError as IO, so they classify an error that carries nothing
// greater. Of(nil) and an error with no class are Unclassified.
func Of(err error) Class {
	if err == nil {
		return Unclassified
	}
	if errors.Is(err, context.Canceled) {
		return Interrupted // the greatest class: nothing can outrank it
	}
	return greatest(err, Unclassified)
}

// greatest walks err's tree depth-first and returns the greatest class of
// best and every node's own class.
func greatest(err error, best Class) Class {
	best = max(best, own(err))
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			best = greatest(next, best)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			if next != nil {
				best = greatest(next, best)
			}
		}
	}
	return best
}

// own is the class of one node of a tree, its wrapped errors aside.
func own(err error) Class {
	switch e := err.(type) {
	case Classed:
		return e.Class()
	case *fs.PathError:
		return IO
	}
	return Unclassified
}
