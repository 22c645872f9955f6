//go:build purego

package codecs

// simdImpl is unused in a purego build: no SIMD kernel is compiled.
const simdImpl = ImplGeneric

const (
	simdNeedsNVFP4  = ""
	simdNeedsScan   = ""
	simdNeedsAffine = ""
)

// searchAffineFastOK: searchAffineGroupsFast does nothing in this build.
func searchAffineFastOK() bool { return false }

// genericWhy says why no kernel runs.
func genericWhy(string) string { return "built with -tags purego" }
