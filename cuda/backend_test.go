package cuda

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backendtest"
)

// TestBackendConformance runs the runtime's backend conformance suite on the
// GPU (skipped without one).
func TestBackendConformance(t *testing.T) {
	d, _ := device(t)
	b := Backend(d)
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	t.Logf("device %s, caps %+v", d.Name(), b.Caps())
	backendtest.Run(t, b)
}

// TestBackendConformanceGEMM runs the suite with Attention on the GEMM path
// (attention_gemm.go) that bf16 precision uses, in f32 arithmetic
// (Options.Attention): run its Attention subtests
// (-test.run 'TestBackendConformanceGEMM/Attention').
func TestBackendConformanceGEMM(t *testing.T) {
	d, _ := device(t)
	b, err := NewBackend(d, Options{Attention: AttentionGEMM})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if got := b.Caps().Kernels["attention"]; got != "gemm-f32" {
		t.Fatalf("Caps().Kernels[attention] = %q, want gemm-f32", got)
	}
	backendtest.Run(t, b)
}
