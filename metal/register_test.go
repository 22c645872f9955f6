package metal

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// Backend "metal" is registered. Off macOS on Apple silicon (and on a Mac
// without a usable device) opening it fails in one line with a no_backend
// error wrapping ErrUnavailable, whatever the precision; on a Mac it opens
// in f32 and refuses bf16 in one line wrapping backend.ErrUnknown.
func TestRegisteredBackend(t *testing.T) {
	if !slices.Contains(backend.Names(), "metal") {
		t.Fatalf("backend names %v lack metal", backend.Names())
	}
	for _, precision := range []string{"", backend.F32, backend.BF16} {
		b, err := backend.Open("metal", backend.Config{Precision: precision})
		if err == nil {
			if runtime.GOOS != "darwin" || precision == backend.BF16 {
				t.Fatalf("Open(metal, %q) succeeded", precision)
			}
			if b.Name() != "metal" || b.Caps().Kernels["matmul"] != kernelMatMul {
				t.Errorf("Open(metal, %q): %s, caps %+v", precision, b.Name(), b.Caps())
			}
			if _, ok := b.(backend.RouteRecorder); !ok {
				t.Errorf("the registered backend does not record routes")
			}
			if err := b.Close(); err != nil {
				t.Error(err)
			}
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Fatalf("Open(metal, %q): %q is not one line", precision, msg)
		}
		switch {
		case runtime.GOOS != "darwin":
			if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, ErrUnavailable) || errclass.Of(err) != errclass.NoBackend ||
				msg != "backend unavailable: metal unavailable: needs macOS on Apple silicon" {
				t.Fatalf("off macOS: %q (class %v)", msg, errclass.Of(err))
			}
		case errors.Is(err, ErrUnavailable):
			t.Logf("no usable Metal device here: %s", msg)
		case precision == backend.BF16:
			if !errors.Is(err, backend.ErrUnknown) || !strings.Contains(msg, "metal precision bf16 is not implemented") {
				t.Fatalf("bf16 on macOS: %q", msg)
			}
		default:
			t.Fatalf("Open(metal, %q) on macOS: %q", precision, msg)
		}
	}
}

// The precision of a runtime config maps to BackendOptions; only f32 is
// implemented, and everything else is refused wrapping backend.ErrUnknown.
func TestBackendOptions(t *testing.T) {
	for _, c := range []struct {
		precision string
		want      Precision
		ok        bool
		msg       string
	}{
		{"", PrecisionF32, true, ""},
		{"f32", PrecisionF32, true, ""},
		{"bf16", PrecisionBF16, false, "metal precision bf16 is not implemented"},
		{"fp8", 0, false, `metal precision "fp8"`},
	} {
		o, err := optionsFor(backend.Config{Precision: c.precision})
		if err == nil {
			if o.Precision != c.want {
				t.Errorf("%q: precision %v, want %v", c.precision, o.Precision, c.want)
			}
			err = o.validate()
		}
		if (err == nil) != c.ok || (err != nil && (!errors.Is(err, backend.ErrUnknown) || !strings.Contains(err.Error(), c.msg))) {
			t.Errorf("%q: %v", c.precision, err)
		}
	}
	if err := (BackendOptions{Precision: 7}).validate(); !errors.Is(err, backend.ErrUnknown) {
		t.Errorf("precision 7: %v", err)
	}
	if _, err := NewBackend(nil, BackendOptions{}); !errors.Is(err, ErrArgument) {
		t.Errorf("NewBackend without an engine: %v", err)
	}
	if _, err := NewBackend(&DeviceEngine{}, BackendOptions{Precision: PrecisionBF16}); !errors.Is(err, backend.ErrUnknown) {
		t.Errorf("NewBackend in bf16: %v", err)
	}
	if err := (BackendOptions{MoE: 7}).validate(); !errors.Is(err, ErrArgument) {
		t.Errorf("MoE kernel 7: %v", err)
	}
	names := BackendOptions{}.kernelNames()
	for _, op := range []string{"attention", "matmul", "moe", "softembed"} {
		if names[op] == "" {
			t.Errorf("Caps().Kernels has no %s", op)
		}
	}
	if n, sg := names["moe"], (BackendOptions{MoE: MoESimdgroup}).kernelNames()["moe"]; n != "exact-f32" || sg != "simdgroup-f32" {
		t.Errorf("moe kernels %q and %q", n, sg)
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

// The default source of the device engine is UnitSourceFor: every dialect
// file and every Metal-specific file as a Metal translation unit under each
// compile plan (its header, then the prelude); an unknown unit is
// ErrNoSource, naming it.
func TestDefaultSource(t *testing.T) {
	units := append(kernels.Files(), MetalFiles()...)
	if len(MetalFiles()) < 2 {
		t.Errorf("Metal kernel files %v", MetalFiles())
	}
	for _, p := range Plans() {
		for _, u := range units {
			src, err := defaultSource(u, p)
			if err != nil || !strings.HasPrefix(src, p.Header()+kernels.Prelude(kernels.Metal)) || !strings.Contains(src, "\n#line 1 \""+u+"\"\n") {
				t.Errorf("defaultSource(%s, %s): %v", u, p.Name, err)
			}
		}
		for _, u := range []string{"nope.kern", "nope.metal", "../gemm.metal"} {
			if _, err := defaultSource(u, p); !errors.Is(err, ErrNoSource) || !strings.Contains(err.Error(), `"`+u+`"`) {
				t.Errorf("defaultSource(%s): %v", u, err)
			}
		}
	}
}
