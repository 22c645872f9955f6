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

// TestBackendConformanceBLAS runs the suite with Attention on the GEMM path
// (attention_blas.go) that bf16 precision uses, in f32 arithmetic: run its
// Attention subtests (-test.run 'TestBackendConformanceBLAS/Attention').
func TestBackendConformanceBLAS(t *testing.T) {
	d, _ := device(t)
	t.Setenv("DGQ_CUDA_ATTN", "blas")
	b := Backend(d)
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	backendtest.Run(t, b)
}
