// Package cuda is dgq's CUDA backend: it drives an NVIDIA GPU from a Go
// binary built with CGO_ENABLED=0, loading the driver, NVRTC and cuBLAS with
// purego at first use (a clean ErrUnavailable where they are absent),
// compiling its kernels at run time for the device (with an on-disk cubin
// cache) and implementing backend.Backend on them. It registers itself as
// backend "cuda".
//
// Layers, bottom up:
//
//   - the device (Open, Device, Buffer, Module, Compile; lib.go, device.go,
//     buffer.go, module.go, nvrtc.go, cublas.go);
//   - kernel sources (kernels.go): the shared dialect of package
//     runtime/kernels compiled after the CUDA prelude, and the CUDA-specific
//     tensor-core kernels of kernels/moe_mma.cu;
//   - Ops, launchers of those kernels on device pointers (ops*.go), and the
//     resident planar layout of stored tensors (planar.go);
//   - the backend (backend*.go): backend.Backend on Ops and cuBLAS, its
//     kernels chosen once from typed Options (options.go; Caps().Kernels
//     reports the choice) and its scratch in one arena (arena.go);
//   - diagnostics (report.go): the backend describes its device
//     (backend.DeviceDescriber) and compiles every kernel file to report
//     each kernel's limits (backend.KernelReporter).
//
// Alternate kernels under development, with their benchmarks, live in
// cuda/internal/dev, outside the production path. docs/cuda.md describes
// the backend.
package cuda
