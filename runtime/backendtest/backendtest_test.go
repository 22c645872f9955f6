package backendtest_test

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime"
	"github.com/dgq-dev/dgq/runtime/backendtest"
)

func TestCPUBackend(t *testing.T) {
	b := runtime.CPUBackend()
	defer b.Close()
	if c := b.Caps(); !c.Host || len(c.Formats) == 0 {
		t.Errorf("Caps = %+v", c)
	}
	backendtest.Run(t, b)
}
