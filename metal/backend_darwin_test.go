package metal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dgq-dev/dgq/metal"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/backendtest"
	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/model"
)

// deviceBackend returns the Metal backend on the system's default device
// (the kernels of runtime/kernels and metal/kernels), or fails without one
// (noDevice).
func deviceBackend(t *testing.T) backend.Backend {
	t.Helper()
	e, err := metal.OpenDevice(metal.Options{})
	if errors.Is(err, metal.ErrUnavailable) {
		noDevice(t, err)
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
// device, as the CUDA backend runs it on a GPU, with the options the
// device's Caps give (backendtest.Run: flushed subnormals accepted, the
// math functions held to MSL Table 8.1): the numerics the device reports
// are AppleGPU, which the host engine's "apple" variant runs on Linux.
func TestDeviceBackendConformance(t *testing.T) {
	b := deviceBackend(t)
	if got := b.Caps().Numerics; got != metal.AppleGPU {
		t.Fatalf("Caps().Numerics = %+v, want AppleGPU", got)
	}
	backendtest.Run(t, b)
}

// TestDeviceKernelReport: every kernel of the package compiles on the
// device into a pipeline of SIMD width 32 (the report dgq selftest prints).
func TestDeviceKernelReport(t *testing.T) {
	b := deviceBackend(t)
	r, err := b.(backend.KernelReporter).KernelReport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range r.Units {
		if u.Error != "" {
			t.Errorf("%s: %s", u.Name, u.Error)
		}
		for _, k := range u.Kernels {
			t.Logf("%s %s: max threads %d, width %d, static %d bytes %s", u.Name, k.Name, k.MaxThreads, k.SIMDWidth, k.StaticSharedBytes, k.Error)
			if k.Error != "" || k.SIMDWidth != metal.SIMDWidth || k.MaxThreads < 32 || k.StaticSharedBytes < 0 {
				t.Errorf("%s %s: %+v", u.Name, k.Name, k)
			}
		}
	}
	if r.Failed() != 0 || r.Kernels() < 20 {
		t.Errorf("%d kernels, %d failed", r.Kernels(), r.Failed())
	}
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
			r, err := check.Parity(t.Context(), e, ref, check.DefaultBounds())
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
