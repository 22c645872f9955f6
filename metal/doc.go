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
// The backend (NewBackend; backend*.go) runs every op on any Engine with the
// shared kernels of runtime/kernels and the Metal-specific ones of
// metal/kernels (the SIMD-group-matrix GEMM, copies), weights resident in
// their stored formats, f32 only; BackendOptions and Caps().Kernels name its
// choices. The registered opener (register.go) opens the device and the
// backend over it; off macOS it fails in one line with ErrUnavailable, which
// cmd/dgq reports with exit code 6.
//
// The real engine is DeviceEngine (OpenDevice; *_darwin.go): Shared and
// no-copy buffers, kernels compiled from Metal source (Options.Source,
// UnitSource by default) with safe math and cached per (unit, kernel),
// dispatches batched into one command buffer per Sync. Off macOS OpenDevice
// fails with ErrUnavailable.
//
// The host engine (HostEngine: host_engine.go, host_build.go,
// host_launch.go, host_sanitize.go, the C runtimes in hostrt/) and the strict
// check of the kernels' Metal text (internal/msl) are described in
// docs/metal-host.md; dispatch.go and errors.go hold the argument checks and
// the sentinel errors both engines share.
package metal
