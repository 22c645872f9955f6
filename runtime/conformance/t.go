package conformance

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// T is what the suite needs of a test: a *testing.T (through
// runtime/backendtest) or a Recorder (dgq selftest, which runs the suite
// without the testing package). Fatal and Fatalf end the calling test's
// goroutine, as testing's do: the suite calls them only on the goroutine
// Run gave it.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(f func())
	// Run runs f as a subtest named name and reports whether it passed.
	Run(name string, f func(t T)) bool
}

// Result is one test of a recorded run: its name (subtests joined with
// "/"), whether it failed, and its messages in order (failures and logs).
type Result struct {
	Name     string
	Failed   bool
	Messages []string
}

// Recorder is a T that records instead of printing: every test and subtest
// becomes a Result, in the order they started. A panic in a test is
// recorded as its failure (with the stack), and the run goes on.
type Recorder struct {
	mu      sync.Mutex
	results []*Result
	// log, when not nil, receives each finished test as it ends (a
	// progress line for a terminal).
	log func(r Result)
}

// NewRecorder returns an empty Recorder; progress, when not nil, is called
// with each test as it ends (subtests before their parent).
func NewRecorder(progress func(r Result)) *Recorder { return &Recorder{log: progress} }

// Results returns the recorded tests, in the order they started.
func (r *Recorder) Results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Result, len(r.results))
	for i, res := range r.results {
		out[i] = *res
		out[i].Messages = append([]string(nil), res.Messages...)
	}
	return out
}

// Run runs f as the top-level test name.
func (r *Recorder) Run(name string, f func(t T)) bool {
	return (&recT{rec: r}).Run(name, f)
}

// recT is one running test of a Recorder.
type recT struct {
	rec      *Recorder
	parent   *recT
	res      *Result
	mu       sync.Mutex
	cleanups []func()
}

func (t *recT) Helper() {}

func (t *recT) add(failed bool, msg string) {
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	t.res.Messages = append(t.res.Messages, msg)
	if failed {
		for p := t; p != nil; p = p.parent {
			p.res.Failed = true
		}
	}
}

func (t *recT) Logf(format string, args ...any) { t.add(false, fmt.Sprintf(format, args...)) }
func (t *recT) Error(args ...any)               { t.add(true, strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (t *recT) Errorf(format string, args ...any) {
	t.add(true, fmt.Sprintf(format, args...))
}

// Fatal and Fatalf record the failure and end the test's goroutine (its
// cleanups still run).
func (t *recT) Fatal(args ...any) { t.Error(args...); runtime.Goexit() }
func (t *recT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

func (t *recT) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

// Run runs f on a goroutine of its own (so that Fatal ends only it) and
// waits for it; the subtest's cleanups run last first when f returns.
func (t *recT) Run(name string, f func(t T)) bool {
	sub := &recT{rec: t.rec, res: &Result{Name: name}}
	if t.res != nil { // not the Recorder's root
		sub.parent, sub.res.Name = t, t.res.Name+"/"+name
	}
	t.rec.mu.Lock()
	t.rec.results = append(t.rec.results, sub.res)
	t.rec.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sub.runCleanups()
		defer func() {
			if p := recover(); p != nil {
				sub.add(true, fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
			}
		}()
		f(sub)
	}()
	<-done
	t.rec.mu.Lock()
	res, log := *sub.res, t.rec.log
	t.rec.mu.Unlock()
	if log != nil {
		log(res)
	}
	return !res.Failed
}

func (t *recT) runCleanups() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.add(true, fmt.Sprintf("panic in cleanup: %v", p))
				}
			}()
			fs[i]()
		}()
	}
}
