package codecs

// KernelChoice is which implementation of one of the package's routines
// runs on this machine: the choice the package's dispatch made at init from
// the CPU's features and the build (tag purego), read back from the very
// variables the encoders consult, so that it cannot differ from what runs.
// Every implementation gives the same bytes as the scalar reference; the
// choice changes the speed only.
type KernelChoice struct {
	// Name is the routine: KernelNVFP4Search, KernelAffineSearch or
	// KernelSourceScan.
	Name string `json:"name"`
	// Impl is the implementation that runs: ImplAVX512 or ImplGeneric.
	Impl string `json:"impl"`
	// Note says why the generic implementation runs where a SIMD one
	// exists for another machine or build ("" when the SIMD one runs).
	Note string `json:"note,omitempty"`
}

// The routines Kernels reports.
const (
	// KernelNVFP4Search is the searching nvfp4 block encoder (Search
	// encoder of the nvfp4 kind).
	KernelNVFP4Search = "nvfp4_search"
	// KernelAffineSearch is the affine group search of the Search encoder
	// (q4, q5, q6 groups of 32).
	KernelAffineSearch = "affine_search"
	// KernelSourceScan is the scan of a source tensor for its largest
	// magnitude (and any NaN or infinity) before it is encoded.
	KernelSourceScan = "source_scan"
)

// The implementations of KernelChoice.Impl.
const (
	// ImplAVX512 is an amd64 AVX-512 kernel, bit-identical to the reference.
	ImplAVX512 = "avx512"
	// ImplGeneric is the scalar reference in Go.
	ImplGeneric = "generic"
)

// Kernels reports, for each routine that has a SIMD kernel on some
// machine, which implementation runs here, in a fixed order.
func Kernels() []KernelChoice {
	return []KernelChoice{
		kernelChoice(KernelNVFP4Search, nvfp4Fast != nil, simdNeedsNVFP4),
		kernelChoice(KernelAffineSearch, searchAffineFastOK(), simdNeedsAffine),
		kernelChoice(KernelSourceScan, scanFast != nil, simdNeedsScan),
	}
}

// kernelChoice is the choice of routine name: simd says whether its SIMD
// kernel runs, needs what that kernel needs.
func kernelChoice(name string, simd bool, needs string) KernelChoice {
	if simd {
		return KernelChoice{Name: name, Impl: simdImpl}
	}
	return KernelChoice{Name: name, Impl: ImplGeneric, Note: genericWhy(needs)}
}
