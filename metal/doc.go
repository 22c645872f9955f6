// Package metal is dgq's Metal backend: the runtime's backend.Backend on
// Apple silicon, registered as backend "metal".
//
// It is built over a small engine seam (Engine: alloc, wrap, pipeline,
// dispatch, sync) with two implementations: the real one on darwin, which
// drives Metal.framework through purego's Objective-C runtime bindings (no
// cgo), and a host engine, which runs the very Metal text of every kernel on
// the CPU from a clang-built shared library, so that Linux CI proves the
// backend before a Mac runs it. docs/metal.md says what is proven where.
//
// The real engine is DeviceEngine (OpenDevice; *_darwin.go): Shared and
// no-copy buffers, kernels compiled from Metal source (Options.Source) with
// safe math and cached per (unit, kernel), dispatches batched into one
// command buffer per Sync. Off macOS OpenDevice fails with ErrUnavailable.
// The backend.Backend over the seam is not written yet: opening backend
// "metal" fails in one line (ErrUnavailable off macOS on Apple silicon,
// ErrNotImplemented on it), which cmd/dgq reports with exit code 6.
//
// The host engine (HostEngine: host_engine.go, host_build.go,
// host_launch.go, host_sanitize.go, the C runtime in hostrt/) and the strict
// check of the kernels' Metal text (internal/msl) are described in
// docs/metal-host.md; dispatch.go and errors.go hold the argument checks and
// errors both engines share.
package metal
