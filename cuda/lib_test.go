package cuda

import (
	"strings"
	"testing"
)

// TestEntryPointTables checks that each library's symbol list names every
// entry point of its table, so that bind fills every field in order.
func TestEntryPointTables(t *testing.T) {
	for _, c := range []struct {
		lib     string
		syms    string
		entries int
	}{
		{"libcuda", driverSymbols, entryPoints(&drv)},
		{"libcublas", blasSymbols, entryPoints(&blas)},
		{"libnvrtc", nvrtcSymbols, entryPoints(&nvrtc)},
	} {
		if n := len(strings.Fields(c.syms)); n != c.entries {
			t.Errorf("%s: %d symbols for %d entry points", c.lib, n, c.entries)
		}
	}
}
