package codecs

import (
	"runtime"
	"testing"
)

// Kernels reports the three routines with a SIMD kernel, in order, each
// with the implementation the dispatch variables select.
func TestKernelsMatchDispatch(t *testing.T) {
	ks := Kernels()
	want := []struct {
		name string
		simd bool
	}{
		{KernelNVFP4Search, nvfp4Fast != nil},
		{KernelAffineSearch, searchAffineFastOK()},
		{KernelSourceScan, scanFast != nil},
	}
	if len(ks) != len(want) {
		t.Fatalf("Kernels() = %d entries %+v, want %d", len(ks), ks, len(want))
	}
	for i, w := range want {
		k := ks[i]
		if k.Name != w.name {
			t.Errorf("Kernels()[%d].Name = %q, want %q", i, k.Name, w.name)
		}
		switch {
		case w.simd && (k.Impl != ImplAVX512 || k.Note != ""):
			t.Errorf("%s: %+v, want impl %s without a note (its SIMD kernel is dispatched)", k.Name, k, ImplAVX512)
		case !w.simd && (k.Impl != ImplGeneric || k.Note == ""):
			t.Errorf("%s: %+v, want impl %s with the reason in its note", k.Name, k, ImplGeneric)
		}
		if runtime.GOARCH != "amd64" && k.Impl != ImplGeneric {
			t.Errorf("%s: impl %s on %s, which has no SIMD kernel", k.Name, k.Impl, runtime.GOARCH)
		}
	}
}
