//go:build !amd64 && !purego

package codecs

import "runtime"

// simdImpl is unused where no SIMD kernel is compiled (every architecture
// but amd64).
const simdImpl = ImplGeneric

const (
	simdNeedsNVFP4  = ""
	simdNeedsScan   = ""
	simdNeedsAffine = ""
)

// searchAffineFastOK: searchAffineGroupsFast does nothing on this
// architecture.
func searchAffineFastOK() bool { return false }

// genericWhy says why no kernel runs.
func genericWhy(string) string { return "no SIMD kernel for " + runtime.GOARCH }
