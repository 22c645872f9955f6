package metal_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// optional lets the device tests skip where no usable Metal device exists
// (a virtual Mac without the Apple7 and Metal 3 GPU families); without it
// they fail there, so that a run that tested nothing cannot print ok.
var optional = flag.Bool("metal.optional", false,
	"skip the device tests when no usable Metal device exists (default: they fail)")

// noDevice ends a test that found no usable device: a skip off Apple
// silicon (an Intel Mac is no target) or with -metal.optional, else a
// failure that says how to skip.
func noDevice(t *testing.T, err error) {
	t.Helper()
	if *optional || runtime.GOARCH != "arm64" {
		t.Skipf("no usable Metal device: %v", err)
	}
	t.Fatalf("no usable Metal device: %v (a Mac without one, e.g. a virtual Mac: go test ./metal/ -args -metal.optional skips the device tests)", err)
}

// TestMain refuses Metal's validation switches set so that their reports
// would be lost: shader validation reports to the OS log unless told to
// write to stderr and to fail the command buffer (which the engine turns
// into ErrCommand), and the API validation layer's default mode aborts the
// whole test binary at its first report.
func TestMain(m *testing.M) {
	flag.Parse()
	if msg := validationSetup(os.Getenv); msg != "" {
		fmt.Fprintln(os.Stderr, "metal tests:", msg)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
