//go:build dgq_metalhost

package metal

// openEngine, in a build with the tag dgq_metalhost (a test build: CI runs
// `dgq selftest --backend metal` through it on Linux, .ci/metal), is the
// host engine in AppleHost mode: the backend's Metal text compiled by clang
// for the CPU and run as the MSL specification allows an Apple GPU to run
// it, at its limits. Builds users run never carry the tag.
func openEngine() (Engine, error) {
	e, err := NewHostEngine(AppleHost())
	if err != nil {
		return nil, err
	}
	return e, nil
}
