//go:build linux

package metal

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/backendtest"
	"github.com/dgq-dev/dgq/runtime/conformance"
)

var _ backend.RouteRecorder = (*metalBackend)(nil)

// hostBackend returns a backend with the default options on a host engine
// of the test's own.
func hostBackend(t *testing.T, opts HostOptions) backend.Backend {
	t.Helper()
	return hostBackendWith(t, opts, BackendOptions{})
}

// hostBackendWith returns a backend with options bo on a host engine of the
// test's own.
func hostBackendWith(t *testing.T, opts HostOptions, bo BackendOptions) backend.Backend {
	t.Helper()
	e := newHost(t, opts)
	b, err := NewBackend(e, bo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestBackendConformance runs the whole conformance suite (under -short its
// small shapes) on the backend over the host engine in the variants of
// what a GPU may do — IEEE arithmetic, SIMD reductions in another lane
// order, f32 subnormals flushed to zero, and AppleHost, everything MSL
// allows at once (flushed subnormals, math functions at Table 8.1's bounds,
// contraction within statements, another SIMD order) — and with the second
// MoE kernel (MoESimdgroup). Each variant's options come from its backend's
// Caps (conformance.OptionsFor), as on the device.
func TestBackendConformance(t *testing.T) {
	variants := []struct {
		name    string
		host    HostOptions
		backend BackendOptions
	}{
		{"ieee", HostOptions{}, BackendOptions{}},
		{"simd-reversed", HostOptions{SIMDOrder: SIMDReversed}, BackendOptions{}},
		{"flush-subnormals", HostOptions{FlushSubnormals: true}, BackendOptions{}},
		{"apple", AppleHost(), BackendOptions{}},
		{"moe-simdgroup", HostOptions{}, BackendOptions{MoE: MoESimdgroup}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			b := hostBackendWith(t, v.host, v.backend)
			if got, want := b.Caps().Kernels, v.backend.kernelNames(); got["moe"] != want["moe"] {
				t.Fatalf("Caps().Kernels %v, want %v", got, want)
			}
			if got := b.Caps().Numerics.FlushSubnormals; got != v.host.FlushSubnormals {
				t.Fatalf("Caps().Numerics.FlushSubnormals %v, want %v", got, v.host.FlushSubnormals)
			}
			backendtest.RunOpts(t, b, conformance.OptionsFor(b.Caps(), testing.Short()))
		})
	}
}

// TestAppleHostReportsTheDevicesNumerics: a backend over the host engine in
// AppleHost mode reports exactly the numerics the device engine reports
// (AppleGPU), so the "apple" variant runs the suite with the options the
// device test derives from the device's Caps; and those are MSL Table 8.1's
// bounds with flushing allowed.
func TestAppleHostReportsTheDevicesNumerics(t *testing.T) {
	b := hostBackendWith(t, AppleHost(), BackendOptions{})
	if got := b.Caps().Numerics; got != AppleGPU {
		t.Errorf("AppleHost backend reports %+v, want AppleGPU %+v", got, AppleGPU)
	}
	var dev DeviceEngine
	if got := dev.Numerics(); got != AppleGPU {
		t.Errorf("DeviceEngine.Numerics() = %+v, want AppleGPU", got)
	}
	want := backend.MathULP{Exp: 4, Log: 4, Tanh: 5, Sin: 4, Cos: 4, Sqrt: 0.5, Rsqrt: 0.5, Div: 0.5}
	if AppleGPU.ULP != want || !AppleGPU.FlushSubnormals {
		t.Errorf("AppleGPU = %+v, want Table 8.1's bounds %+v and flushing", AppleGPU, want)
	}
	o := conformance.OptionsFor(backend.Caps{Numerics: AppleGPU}, false)
	if o.Numerics != AppleGPU || o.Small {
		t.Errorf("OptionsFor(device caps) = %+v", o)
	}
}
