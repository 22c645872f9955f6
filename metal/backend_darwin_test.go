package metal_test

import (
	"errors"
	"testing"

	"github.com/dgq-dev/dgq/metal"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/backendtest"
	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/model"
)

// deviceBackend returns the Metal backend on the system's default device
// (the kernels of runtime/kernels and metal/kernels), or skips without one.
func deviceBackend(t *testing.T) backend.Backend {
	t.Helper()
	e, err := metal.OpenDevice(metal.Options{})
	if errors.Is(err, metal.ErrUnavailable) {
		t.Skipf("no usable Metal device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := metal.NewBackend(e, metal.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestDeviceBackendConformance runs the whole conformance suite on the
// device, as the CUDA backend runs it on a GPU.
func TestDeviceBackendConformance(t *testing.T) {
	backendtest.Run(t, deviceBackend(t))
}

// TestDeviceEngineParity runs the tiny checkpoint's transformers scenarios
// on the device through model.Engine: every tensor within the reference's
// bounds (bf16 pack) and within check.VsCPUF32 of the CPU runtime.
func TestDeviceEngineParity(t *testing.T) {
	for _, profile := range []string{"bf16", "q4", "nvfp4"} {
		t.Run("tiny/"+profile, func(t *testing.T) {
			m, ref := metal.TinyPack(t, profile)
			e, err := model.NewEngine(m, deviceBackend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r, err := check.Parity(e, ref, check.DefaultBounds())
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cases {
				t.Logf("%-24s max abs %.3g (bound %.3g) vs cpu %.3g argmax %.3f pass %v", c.Name, c.MaxAbsErr, c.Tolerance, c.VsCPU, c.ArgmaxAgree, c.Pass)
			}
			if judged := profile == "bf16"; !r.Pass || r.Judged != judged {
				t.Errorf("parity pass %v judged %v (want %v: %s)", r.Pass, r.Judged, judged, r.NoVerdict)
			}
		})
	}
}
