package metal

import "errors"

// Errors of the engines. Each is wrapped by an error that says more.
var (
	// ErrEngineClosed: a call on an Engine after Close.
	ErrEngineClosed = errors.New("metal: engine closed")
	// ErrUnknownUnit: Pipeline for a translation unit the engine does not
	// know (not a kernel file of runtime/kernels, nor one the engine was
	// given).
	ErrUnknownUnit = errors.New("metal: unknown translation unit")
	// ErrUnknownKernel: Pipeline for a kernel its unit does not declare.
	ErrUnknownKernel = errors.New("metal: unknown kernel")
	// ErrForeign: a Pipeline or Mem of another engine (or already freed).
	ErrForeign = errors.New("metal: pipeline or buffer not of this engine")
	// ErrBadArgs: Dispatch arguments that do not match the kernel's
	// signature (count, kind, scalar size, offset, alignment).
	ErrBadArgs = errors.New("metal: arguments do not match the kernel")
	// ErrReadOnly: a read-only buffer (Wrap) bound to a BUF parameter.
	ErrReadOnly = errors.New("metal: read-only buffer bound to a writable parameter")
	// ErrBadGeometry: a launch whose threads per group are not 1 to the
	// pipeline's MaxThreads, or with a negative count.
	ErrBadGeometry = errors.New("metal: bad launch geometry")
	// ErrBadSize: Alloc of a negative size.
	ErrBadSize = errors.New("metal: bad buffer size")

	// ErrHostUnavailable: the host engine cannot run here (not Linux, no
	// clang 19, or no runtime for the asked sanitizer).
	ErrHostUnavailable = errors.New("metal: host engine unavailable")
	// ErrHostBuild: clang failed to build a unit for the host.
	ErrHostBuild = errors.New("metal: host build failed")
	// ErrHostLaunch: the host runtime could not run a launch (threads,
	// memory, or a sanitizer build's driver failed).
	ErrHostLaunch = errors.New("metal: host launch failed")
	// ErrDivergentBarrier: the threads of a group did not meet at the same
	// barriers (some reached a barrier or SIMD exchange that others skipped);
	// undefined behaviour on a GPU, detected by the host runtime.
	ErrDivergentBarrier = errors.New("metal: threads of a group met different barriers")
	// ErrSanitizer: a sanitizer build of the host engine reported a data race
	// or a bad memory access.
	ErrSanitizer = errors.New("metal: sanitizer report")
)
