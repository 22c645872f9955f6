//go:build linux

package metal

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/backendtest"
)

var _ backend.RouteRecorder = (*metalBackend)(nil)

// hostBackend returns a backend on a host engine of the test's own.
func hostBackend(t *testing.T, opts HostOptions) backend.Backend {
	t.Helper()
	e := newHost(t, opts)
	b, err := NewBackend(e, BackendOptions{})
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
// what a GPU may do: IEEE arithmetic, SIMD reductions in another lane
// order, and f32 subnormals flushed to zero.
func TestBackendConformance(t *testing.T) {
	variants := []struct {
		name  string
		host  HostOptions
		suite backendtest.Options
	}{
		{"ieee", HostOptions{}, backendtest.Options{}},
		{"simd-reversed", HostOptions{SIMDOrder: SIMDReversed}, backendtest.Options{}},
		{"flush-subnormals", HostOptions{FlushSubnormals: true}, backendtest.Options{FlushSubnormals: true}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			v.suite.Small = testing.Short()
			backendtest.RunOpts(t, hostBackend(t, v.host), v.suite)
		})
	}
}
