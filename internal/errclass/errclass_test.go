package errclass_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/internal/errclass"
)

var (
	errUsage   = errclass.New(errclass.Usage, "pkg: bad option")
	errInvalid = errclass.New(errclass.Invalid, "pkg: bad input")
	errStale   = errclass.New(errclass.Stale, "pkg: stale")
	errBackend = errclass.New(errclass.NoBackend, "backend unavailable")
	errIO      = errclass.New(errclass.IO, "pkg: disk full")
	errPlain   = errors.New("pkg: plain")
	// errSpecific is an invalid-input sentinel that also matches errPlain.
	errSpecific = errclass.Wrap(errclass.Invalid, "pkg: plain, specifically", errPlain)
	// errNarrow is a usage sentinel that is a case of errInvalid.
	errNarrow = errclass.Wrap(errclass.Usage, "pkg: bad input given twice", errInvalid)
	pathErr   = &fs.PathError{Op: "open", Path: "f", Err: fs.ErrNotExist}
)

func TestSentinels(t *testing.T) {
	cases := []struct {
		err   error
		text  string
		class errclass.Class
		is    []error
		isnt  []error
	}{
		{errUsage, "pkg: bad option", errclass.Usage, []error{errUsage}, []error{errInvalid, errclass.New(errclass.Usage, "pkg: bad option")}},
		{errSpecific, "pkg: plain, specifically", errclass.Invalid, []error{errSpecific, errPlain}, []error{errInvalid}},
		{errNarrow, "pkg: bad input given twice", errclass.Usage, []error{errNarrow, errInvalid}, []error{errUsage}},
		{fmt.Errorf("%w: detail", errStale), "pkg: stale: detail", errclass.Stale, []error{errStale}, []error{errUsage}},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			if got := c.err.Error(); got != c.text {
				t.Errorf("Error() = %q, want %q", got, c.text)
			}
			if got := errclass.Of(c.err); got != c.class {
				t.Errorf("Of = %v, want %v", got, c.class)
			}
			for _, target := range c.is {
				if !errors.Is(c.err, target) {
					t.Errorf("errors.Is(%v, %v) = false", c.err, target)
				}
			}
			for _, target := range c.isnt {
				if errors.Is(c.err, target) {
					t.Errorf("errors.Is(%v, %v) = true", c.err, target)
				}
			}
		})
	}
}

func TestOf(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want errclass.Class
	}{
		{"nil", nil, errclass.Unclassified},
		{"plain", errPlain, errclass.Unclassified},
		{"deadline", context.DeadlineExceeded, errclass.Unclassified},
		{"canceled", context.Canceled, errclass.Interrupted},
		{"wrapped canceled", fmt.Errorf("x: %w", context.Canceled), errclass.Interrupted},
		{"path error", pathErr, errclass.IO},
		{"wrapped path error", fmt.Errorf("x: %w", pathErr), errclass.IO},
		{"io sentinel", errIO, errclass.IO},
		{"usage", fmt.Errorf("a: %w", fmt.Errorf("b: %w", errUsage)), errclass.Usage},
		{"invalid", errInvalid, errclass.Invalid},
		{"stale", errStale, errclass.Stale},
		{"backend", errBackend, errclass.NoBackend},
		{"invalid over path error", fmt.Errorf("%w: %w", errInvalid, pathErr), errclass.Invalid},
		{"path error over unclassified", fmt.Errorf("%w: %w", errPlain, pathErr), errclass.IO},
		{"usage over invalid", fmt.Errorf("%w: %w", errInvalid, errUsage), errclass.Usage},
		{"wrapping sentinel over what it wraps", errNarrow, errclass.Usage},
		{"wrapped sentinel over the wrapper", errclass.Wrap(errclass.Invalid, "x", errStale), errclass.Stale},
		{"stale over usage", errors.Join(errUsage, errStale), errclass.Stale},
		{"backend over stale", fmt.Errorf("%w: %w", errStale, errBackend), errclass.NoBackend},
		{"canceled over backend", errors.Join(errBackend, fmt.Errorf("x: %w", context.Canceled)), errclass.Interrupted},
		{"deep join", errors.Join(errPlain, errors.Join(nil, errPlain, fmt.Errorf("c: %w", errStale))), errclass.Stale},
		{"own Class method", classedType{errclass.Usage}, errclass.Usage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errclass.Of(c.err); got != c.want {
				t.Errorf("Of(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

type classedType struct{ c errclass.Class }

func (e classedType) Error() string         { return "typed" }
func (e classedType) Class() errclass.Class { return e.c }

func TestClassString(t *testing.T) {
	seen := map[string]bool{}
	for c := errclass.Unclassified; c <= errclass.Interrupted; c++ {
		s := c.String()
		if s == "" || seen[s] {
			t.Errorf("class %d: name %q empty or repeated", c, s)
		}
		seen[s] = true
	}
	if s := errclass.Class(200).String(); s != "Class(200)" {
		t.Errorf("unknown class: %q", s)
	}
}

// classOfByIs is the specification Of is held to: the first class, in
// precedence order, one of whose errors is in the tree under errors.Is
// (context.Canceled for Interrupted), then *fs.PathError under errors.As.
func classOfByIs(err error, pool map[errclass.Class][]error) errclass.Class {
	if errors.Is(err, context.Canceled) {
		return errclass.Interrupted
	}
	for c := errclass.Interrupted; c > errclass.Unclassified; c-- {
		for _, target := range pool[c] {
			if errors.Is(err, target) {
				return c
			}
		}
		if c == errclass.IO {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return errclass.IO
			}
		}
	}
	return errclass.Unclassified
}

// FuzzOf builds error trees from a little stack program and checks Of against
// classOfByIs.
func FuzzOf(f *testing.F) {
	leaves := []error{errUsage, errInvalid, errStale, errBackend, errIO, errPlain, errSpecific, errNarrow, pathErr, context.Canceled, context.DeadlineExceeded}
	pool := map[errclass.Class][]error{}
	for _, e := range leaves {
		if c, ok := e.(errclass.Classed); ok {
			pool[c.Class()] = append(pool[c.Class()], e)
		}
	}
	for _, seed := range [][]byte{{0}, {1, 2, 0x80}, {5, 8, 0x81, 0x80}, {3, 4, 0x82, 6, 0x81}, {9, 0, 0x82, 10, 0x82}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		pool := maps.Clone(pool)
		var stack []error
		for _, op := range prog {
			switch {
			case op < 0x80:
				stack = append(stack, leaves[int(op)%len(leaves)])
			case len(stack) == 0:
			case op%4 == 0: // wrap with %w
				stack[len(stack)-1] = fmt.Errorf("w: %w", stack[len(stack)-1])
			case op%4 == 1 && len(stack) >= 2: // two %w
				n := len(stack)
				stack = append(stack[:n-2], fmt.Errorf("%w: %w", stack[n-2], stack[n-1]))
			case op%4 == 2 && len(stack) >= 2: // errors.Join
				n := len(stack)
				stack = append(stack[:n-2], errors.Join(stack[n-2], stack[n-1]))
			case op%4 == 3: // a classed sentinel wrapping the top
				c := errclass.Class(op/4) % (errclass.Interrupted + 1)
				stack[len(stack)-1] = errclass.Wrap(c, "s", stack[len(stack)-1])
				if c != errclass.Unclassified {
					pool[c] = append(slices.Clip(pool[c]), stack[len(stack)-1])
				}
			}
		}
		for _, err := range stack {
			if got, want := errclass.Of(err), classOfByIs(err, pool); got != want {
				t.Fatalf("Of(%v) = %v, want %v", err, got, want)
			}
		}
	})
}
