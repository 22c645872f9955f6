package metal

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/errclass"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// Backend "metal" is registered and, until its ops exist, fails to open in
// one line with a no_backend error: ErrUnavailable off macOS on Apple
// silicon (and on a Mac without a usable device), ErrNotImplemented on one
// whose device opens.
func TestRegisteredBackendFailsCleanly(t *testing.T) {
	if !slices.Contains(backend.Names(), "metal") {
		t.Fatalf("backend names %v lack metal", backend.Names())
	}
	for _, precision := range []string{"", backend.F32, backend.BF16} {
		b, err := backend.Open("metal", backend.Config{Precision: precision})
		if b != nil || err == nil {
			t.Fatalf("Open(metal, %q) = %v, %v; want an error", precision, b, err)
		}
		msg := err.Error()
		if !errors.Is(err, backend.ErrUnavailable) || errclass.Of(err) != errclass.NoBackend || strings.Contains(msg, "\n") {
			t.Fatalf("Open(metal, %q): %q (class %v)", precision, msg, errclass.Of(err))
		}
		switch {
		case runtime.GOOS != "darwin":
			if !errors.Is(err, ErrUnavailable) || msg != "backend unavailable: metal unavailable: needs macOS on Apple silicon" {
				t.Fatalf("off macOS: %q", msg)
			}
		case errors.Is(err, ErrUnavailable):
			t.Logf("no usable Metal device here: %s", msg)
		case !errors.Is(err, ErrNotImplemented):
			t.Fatalf("on macOS: %q is neither ErrUnavailable nor ErrNotImplemented", msg)
		}
	}
}

// Off macOS the device engine exists and refuses everything with
// ErrUnavailable.
func TestOpenDeviceOffDarwin(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("the darwin engine is tested in metal_darwin_test.go")
	}
	e, err := OpenDevice(Options{})
	if e != nil || !errors.Is(err, ErrUnavailable) || err.Error() != "metal unavailable: needs macOS on Apple silicon" {
		t.Fatalf("OpenDevice = %v, %v", e, err)
	}
	var d *DeviceEngine
	if _, err := d.Alloc(4); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Alloc: %v", err)
	}
	if _, err := d.Pipeline("rmsnorm.kern", "rmsnorm_f32"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Pipeline: %v", err)
	}
	if err := d.Sync(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Sync: %v", err)
	}
}

// The default source is the Metal translation unit of a kernel file (the
// Metal prelude first); an unknown unit is refused with ErrNoSource naming
// it.
func TestDefaultSource(t *testing.T) {
	src, err := defaultSource("rope.kern")
	if err != nil || !strings.Contains(src, "metal_stdlib") || !strings.Contains(src, "KERNEL(rope") {
		t.Fatalf("defaultSource(rope.kern): %d bytes, %v", len(src), err)
	}
	_, err = defaultSource("nope.kern")
	if !errors.Is(err, ErrNoSource) || !strings.Contains(err.Error(), `"nope.kern"`) {
		t.Fatalf("defaultSource(nope.kern): %v", err)
	}
}
