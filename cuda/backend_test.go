package cuda

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backendtest"
)

// TestBackendConformance runs the runtime's backend conformance suite on the
// GPU (skipped without one).
func TestBackendConformance(t *testing.T) {
	d, _ := device(t)
	b := Backend(d)
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	t.Logf("device %s, caps %+v", d.Name(), b.Caps())
	backendtest.Run(t, b)
}
