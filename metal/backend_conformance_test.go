//go:build linux

package metal

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/backendtest"
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
// small shapes) on the backend over the host engine in three variants of
// what a GPU may do — IEEE arithmetic, SIMD reductions in another lane
// order, f32 subnormals flushed to zero — and with the second MoE kernel
// (MoESimdgroup).
func TestBackendConformance(t *testing.T) {
	variants := []struct {
		name    string
		host    HostOptions
		backend BackendOptions
		suite   backendtest.Options
	}{
		{"ieee", HostOptions{}, BackendOptions{}, backendtest.Options{}},
		{"simd-reversed", HostOptions{SIMDOrder: SIMDReversed}, BackendOptions{}, backendtest.Options{}},
		{"flush-subnormals", HostOptions{FlushSubnormals: true}, BackendOptions{}, backendtest.Options{FlushSubnormals: true}},
		{"moe-simdgroup", HostOptions{}, BackendOptions{MoE: MoESimdgroup}, backendtest.Options{}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			v.suite.Small = testing.Short()
			b := hostBackendWith(t, v.host, v.backend)
			if got, want := b.Caps().Kernels, v.backend.kernelNames(); got["moe"] != want["moe"] {
				t.Fatalf("Caps().Kernels %v, want %v", got, want)
			}
			backendtest.RunOpts(t, b, v.suite)
		})
	}
}
