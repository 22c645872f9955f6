// Package backendtest runs the conformance suite of backend.Backend
// (runtime/conformance) under go test: Run and RunOpts take a *testing.T.
package backendtest

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/conformance"
)

// Options are the suite's options (conformance.Options).
type Options = conformance.Options

// Run runs the whole conformance suite on b as b's Caps say it may compute
// (conformance.Run).
func Run(t *testing.T, b backend.Backend) { conformance.Run(testingT{t}, b) }

// RunOpts runs the conformance suite on b as o selects
// (conformance.RunOpts).
func RunOpts(t *testing.T, b backend.Backend, o Options) { conformance.RunOpts(testingT{t}, b, o) }

// testingT is a *testing.T seen as a conformance.T.
type testingT struct{ *testing.T }

func (t testingT) Run(name string, f func(t conformance.T)) bool {
	t.Helper()
	return t.T.Run(name, func(t *testing.T) { f(testingT{t}) })
}
