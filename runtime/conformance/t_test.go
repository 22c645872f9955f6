package conformance

import (
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/cpu"
)

// The Recorder runs tests as testing does: subtests named parent/child, a
// failure marks every parent, Fatal ends only its own test (after which its
// cleanups run, last first), a panic is the test's failure and the run goes
// on, and the progress callback sees each test as it ends.
func TestRecorder(t *testing.T) {
	var ended []string
	r := NewRecorder(func(res Result) { ended = append(ended, res.Name) })
	var order []string
	ok := r.Run("top", func(t T) {
		t.Run("pass", func(t T) { t.Logf("fine %d", 1) })
		t.Run("fatal", func(t T) {
			t.Cleanup(func() { order = append(order, "first") })
			t.Cleanup(func() { order = append(order, "second") })
			t.Fatalf("stop %s", "here")
			t.Errorf("not reached")
		})
		t.Run("panic", func(t T) { panic("boom") })
		t.Run("error", func(t T) {
			t.Error("one", 2)
			t.Run("inner", func(t T) {})
		})
	})
	if ok {
		t.Error("Run reported a pass")
	}
	res := r.Results()
	byName := map[string]Result{}
	var names []string
	for _, x := range res {
		byName[x.Name] = x
		names = append(names, x.Name)
	}
	if got := strings.Join(names, ","); got != "top,top/pass,top/fatal,top/panic,top/error,top/error/inner" {
		t.Errorf("results %s", got)
	}
	for name, failed := range map[string]bool{"top": true, "top/pass": false, "top/fatal": true, "top/panic": true,
		"top/error": true, "top/error/inner": false} {
		if byName[name].Failed != failed {
			t.Errorf("%s failed %v, want %v (%q)", name, byName[name].Failed, failed, byName[name].Messages)
		}
	}
	if m := byName["top/fatal"].Messages; len(m) != 1 || m[0] != "stop here" {
		t.Errorf("fatal's messages %q", m)
	}
	if m := byName["top/panic"].Messages; len(m) != 1 || !strings.HasPrefix(m[0], "panic: boom") {
		t.Errorf("panic's messages %q", m)
	}
	if m := byName["top/error"].Messages; len(m) != 1 || m[0] != "one 2" {
		t.Errorf("error's messages %q", m)
	}
	if got := strings.Join(order, ","); got != "second,first" {
		t.Errorf("cleanups ran %s", got)
	}
	if got := strings.Join(ended, ","); got != "top/pass,top/fatal,top/panic,top/error/inner,top/error,top" {
		t.Errorf("progress saw %s", got)
	}
}

// Ops names exactly the top-level tests RunOpts runs, in order (on the CPU
// backend, small shapes, through a Recorder).
func TestOps(t *testing.T) {
	b := cpu.New(0)
	defer b.Close()
	r := NewRecorder(nil)
	r.Run("suite", func(t T) { RunOpts(t, b, OptionsFor(b.Caps(), true)) })
	var top []string
	for _, res := range r.Results() {
		if strings.Count(res.Name, "/") == 1 {
			top = append(top, strings.TrimPrefix(res.Name, "suite/"))
		}
		if res.Failed {
			t.Errorf("%s failed: %q", res.Name, res.Messages)
		}
	}
	if got, want := strings.Join(top, ","), strings.Join(Ops(), ","); got != want || len(top) < 18 {
		t.Errorf("top-level tests %s, Ops %s", got, want)
	}
}
