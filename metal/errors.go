package metal

import (
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/dgq/errclass"
)

// Errors of the Metal device engine. Each error the package returns wraps
// one of them (errors.Is) and reads as one line.
var (
	// ErrUnavailable: Metal cannot run here — not macOS on Apple silicon,
	// Metal.framework or a device missing, or a device without the Apple7
	// and Metal 3 families. The error says which.
	ErrUnavailable = errclass.New(errclass.NoBackend, "metal unavailable")
	// ErrNotImplemented: the device opens, but the backend.Backend over it
	// (the model's ops on the engine seam) is not written yet, so backend
	// "metal" cannot run a pack.
	ErrNotImplemented = errclass.New(errclass.NoBackend, "metal: the Metal backend's ops are not implemented yet")
	// ErrBufferLimit: a buffer longer than the device's maxBufferLength.
	ErrBufferLimit = errclass.New(errclass.NoBackend, "metal: buffer longer than the device allows")
	// ErrUnaligned: host bytes for a no-copy buffer that do not start on a
	// page boundary.
	ErrUnaligned = errclass.New(errclass.Unclassified, "metal: no-copy buffer not page-aligned")
	// ErrNoSource: no Metal text for a translation unit (Options.Source is
	// nil, or it failed).
	ErrNoSource = errclass.New(errclass.Unclassified, "metal: no kernel source")
	// ErrCompile: the Metal compiler refused a translation unit, or a
	// pipeline could not be built from one of its kernels (*CompileError
	// carries the whole log).
	ErrCompile = errclass.New(errclass.Unclassified, "metal: compile failed")
	// ErrNoKernel: a translation unit has no kernel of that name.
	ErrNoKernel = errclass.New(errclass.Unclassified, "metal: no such kernel")
	// ErrArgument: a call the engine refuses before Metal sees it: a
	// negative Alloc, an empty Wrap, a dispatch whose grid or threadgroup is
	// out of range, whose buffer is of another engine or freed, whose offset
	// lies outside its buffer or whose scalar is too long.
	ErrArgument = errclass.New(errclass.Unclassified, "metal: invalid argument")
	// ErrAlloc: the device returned no buffer (out of memory).
	ErrAlloc = errclass.New(errclass.Unclassified, "metal: buffer allocation failed")
	// ErrCommand: a command buffer ended in error (its NSError's
	// description follows).
	ErrCommand = errclass.New(errclass.Unclassified, "metal: command buffer failed")
	// ErrClosed: the engine was closed.
	ErrClosed = errclass.New(errclass.Unclassified, "metal: engine closed")
)

// maxErrorText bounds the compiler log quoted in a CompileError's one-line
// message; the whole log stays in CompileError.Log.
const maxErrorText = 1000

// CompileError is the Metal compiler's refusal of a translation unit (or of
// a pipeline built from one of its kernels). Error() is one line; Log is the
// compiler's whole message, as Metal's NSError described it.
type CompileError struct {
	Unit   string // the translation unit (Engine.Pipeline's unit)
	Kernel string // the kernel, when building its pipeline failed; "" for the unit
	Log    string // the NSError's localizedDescription, unabridged
}

func (e *CompileError) Error() string {
	what := fmt.Sprintf("unit %q", e.Unit)
	if e.Kernel != "" {
		what = fmt.Sprintf("kernel %q of unit %q", e.Kernel, e.Unit)
	}
	return fmt.Sprintf("%v: %s: %s", ErrCompile, what, oneLine(e.Log, maxErrorText))
}

// Unwrap makes a CompileError match ErrCompile.
func (e *CompileError) Unwrap() error { return ErrCompile }

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
