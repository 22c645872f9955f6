// Package msltest holds the test helper that decides whether a test that
// needs clang 19 runs, skips or fails.
package msltest

import (
	"os"
	"testing"

	"github.com/dgq-dev/dgq/metal/internal/msl"
)

// Require returns clang 19. Without it the test is skipped, unless the
// environment variable CI is set: then it fails, so that CI cannot pass
// without running the Metal checks (.ci/metal installs clang-19).
func Require(tb testing.TB) msl.Clang {
	tb.Helper()
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
