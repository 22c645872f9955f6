// Package msltest holds the test helper that decides whether a test that
// needs clang 19 runs, skips or fails.
package msltest

import (
	"os"
	"runtime"
	"testing"

	"github.com/dgq-dev/dgq/metal/internal/msl"
)

// Require returns clang 19. Without it the test is skipped, unless the
// environment variable CI is set: then it fails, so that CI cannot pass
// without running the Metal checks (.ci/metal installs clang-19). Off Linux
// the test is skipped whatever CI says: the check and the host engine are
// Linux tooling, and on a Mac the device tests compile every unit with
// Apple's own compiler instead.
func Require(tb testing.TB) msl.Clang {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skipf("the MSL check and the host engine run on Linux (.ci/metal); on %s the device tests compile the units with the system's compiler", runtime.GOOS)
	}
	cl, err := msl.FindClang()
	if err == nil {
		return cl
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("CI is set and %v", err)
	}
	tb.Skip(err)
	return msl.Clang{}
}
