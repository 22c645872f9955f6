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
// UnitSourceFor by default) under the compile plan of the system it runs on
// (plan.go: the language version, safe math, the contraction pragmas) and
// cached per (unit, kernel), compiler warnings kept and a pipeline's SIMD
// width checked, dispatches batched into one command buffer per Sync. It
// reports AppleGPU, what MSL allows the GPU's arithmetic (numerics.go). Off
// macOS OpenDevice fails with ErrUnavailable.
//
// The backend's diagnostics (diagnostics.go: DeviceInfo, KernelReport,
// ProbeArithmetic with probe.go) are what dgq selftest reports.
//
// The host engine (HostEngine: host_engine.go, host_build.go,
// host_launch.go, host_sanitize.go, the C runtimes in hostrt/; AppleHost
// runs it as MSL allows a GPU to compute, at its limits) and the strict
// check of the kernels' Metal text under every compile plan (internal/msl)
// are described in docs/metal-host.md; dispatch.go and errors.go hold the
// argument checks and the sentinel errors both engines share. A build with
// the test-only tag dgq_metalhost registers the backend over the host engine
// (register_hostengine.go) instead of the device.
package metal
