// Package backend is the contract between the model and the hardware that
// computes it: the Backend interface (buffers, weights in their stored
// format, and the model's ops, each with its tolerance against the CPU
// reference), what a backend's arithmetic may do (Numerics, in its Caps:
// the vendor's documented bounds, from which the conformance suite derives
// its own), the optional diagnostics a backend offers (DeviceDescriber,
// KernelReporter, ArithmeticProber: dgq selftest reports them), the shape
// checks every backend applies before it queues an op, the registry Open
// uses to find a backend by name, and Profiled, a wrapper that times every
// op.
//
// The backends are package cpu (the float64-accumulating reference every
// other backend is tested against), package cuda and package metal; the
// conformance suite that holds them to the tolerances is
// runtime/conformance.
package backend
