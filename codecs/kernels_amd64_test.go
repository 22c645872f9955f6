//go:build amd64 && !purego

package codecs

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// On amd64 the choice follows the CPU's AVX-512 features, read here
// independently of the package's own flags.
func TestKernelsFollowCPUFeatures(t *testing.T) {
	x := cpu.X86
	want := map[string]bool{
		KernelNVFP4Search:  x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL,
		KernelSourceScan:   x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL,
		KernelAffineSearch: x.HasAVX512F && x.HasAVX512DQ && x.HasAVX512CD && x.HasAVX512VL,
	}
	for _, k := range Kernels() {
		w, ok := want[k.Name]
		if !ok {
			t.Errorf("unexpected routine %q", k.Name)
			continue
		}
		if got := k.Impl == ImplAVX512; got != w {
			t.Errorf("%s: impl %s, but the CPU's AVX-512 features say avx512=%v", k.Name, k.Impl, w)
		}
	}
}
