// Package backend is the contract between the model and the hardware that
// computes it: the Backend interface (buffers, weights in their stored
// format, and the model's ops, each with its tolerance against the CPU
// reference), the shape checks every backend applies before it queues an
// op, the registry Open uses to find a backend by name, and Profiled, a
// wrapper that times every op.
//
// The backends are package cpu (the float64-accumulating reference every
// other backend is tested against) and package cuda; the conformance suite
// that holds them to the tolerances is runtime/backendtest.
package backend
