//go:build amd64 && !purego

package codecs

// simdImpl is the implementation of the SIMD kernels of this build.
const simdImpl = ImplAVX512

// What each kernel needs of the CPU: hasAVX512 (nvfp4, scan) and
// searchAffine8OK (affine search).
const (
	simdNeedsNVFP4  = "AVX-512 F, BW, DQ and VL"
	simdNeedsScan   = simdNeedsNVFP4
	simdNeedsAffine = "AVX-512 F, DQ, CD and VL"
)

// searchAffineFastOK reports whether searchAffineGroupsFast runs its
// kernel (it does nothing otherwise).
func searchAffineFastOK() bool { return searchAffine8OK }

// genericWhy says why a kernel needing needs does not run.
func genericWhy(needs string) string { return "the CPU lacks " + needs }
