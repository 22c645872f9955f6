package backendtest_test

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backendtest"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

func TestCPUBackend(t *testing.T) {
	b := cpu.New(0)
	defer b.Close()
	if c := b.Caps(); !c.Host || len(c.Formats) == 0 {
		t.Errorf("Caps = %+v", c)
	}
	backendtest.Run(t, b)
}
