package conformance

import (
	"strings"
	"testing"
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
	if r.Failed() != 4 {
		t.Errorf("Failed() = %d", r.Failed())
	}
}
