package metal

import (
	"fmt"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Errors of the package: of both engines (the device engine on darwin and
// the host engine), one sentinel per meaning, and of the backend over them.
// Each error the package returns wraps one of them (errors.Is) and reads as
// one line; a few are more specific cases of a general one (ErrGeometry,
// ErrForeign and ErrReadOnly are ErrArgument; ErrDivergentBarrier and
// ErrSanitizer are ErrCommand). Each carries an errclass class: the ones
// cmd/dgq can meet opening or running backend "metal" decide its exit code
// (ErrUnavailable and ErrBufferLimit: no_backend, exit code 6); the rest are
// unclassified (exit code 1).
var (
	// ErrUnavailable: Metal cannot run here — not macOS on Apple silicon,
	// Metal.framework or a device missing, or a device without the Apple7
	// and Metal 3 families. The error says which.
	ErrUnavailable = errclass.New(errclass.NoBackend, "metal unavailable")
	// ErrHostUnavailable: the host engine cannot run here (not Linux, no
	// clang 19, or no runtime for the asked sanitizer).
	ErrHostUnavailable = errclass.New(errclass.Unclassified, "metal: host engine unavailable")
	// ErrBufferLimit: a buffer longer than the device's maxBufferLength.
	ErrBufferLimit = errclass.New(errclass.NoBackend, "metal: buffer longer than the device allows")
	// ErrUnaligned: host bytes for a no-copy buffer that do not start on a
	// page boundary.
	ErrUnaligned = errclass.New(errclass.Unclassified, "metal: no-copy buffer not page-aligned")
	// ErrNoSource: no Metal text for a translation unit (an unknown unit
	// name, or Options.Source failed).
	ErrNoSource = errclass.New(errclass.Unclassified, "metal: no kernel source")
	// ErrCompile: a translation unit failed to build — the Metal compiler,
	// or clang for the host engine, refused it, or a pipeline (or the built
	// library) could not be made from it (*CompileError carries a
	// compiler's whole log).
	ErrCompile = errclass.New(errclass.Unclassified, "metal: compile failed")
	// ErrNoKernel: a translation unit has no kernel of that name.
	ErrNoKernel = errclass.New(errclass.Unclassified, "metal: no such kernel")
	// ErrArgument: a call refused before any kernel runs: a negative Alloc,
	// an empty Wrap, dispatch arguments that do not match the kernel (count,
	// kind, scalar size, offset outside the buffer or misaligned for its
	// element type, a scalar too long), invalid options, and the backend's
	// own refusals (a buffer of another backend, a shape its kernels cannot
	// take).
	ErrArgument = errclass.New(errclass.Unclassified, "metal: invalid argument")
	// ErrGeometry: a dispatch whose threadgroup or grid is out of range
	// (threads per group 1 to the pipeline's bound, no negative count).
	ErrGeometry = errclass.Wrap(errclass.Unclassified, "metal: bad launch geometry", ErrArgument)
	// ErrForeign: a Pipeline or Mem of another engine, or one already freed.
	ErrForeign = errclass.Wrap(errclass.Unclassified, "metal: pipeline or buffer not of this engine", ErrArgument)
	// ErrReadOnly: a read-only buffer (Wrap) bound to a writable (BUF)
	// parameter.
	ErrReadOnly = errclass.Wrap(errclass.Unclassified, "metal: read-only buffer bound to a writable parameter", ErrArgument)
	// ErrAlloc: the device returned no buffer (out of memory).
	ErrAlloc = errclass.New(errclass.Unclassified, "metal: buffer allocation failed")
	// ErrCommand: queued work failed when it ran: a Metal command buffer
	// ended in error (its NSError's description follows), or the host
	// runtime could not run a launch (threads, memory, a sanitizer build's
	// driver).
	ErrCommand = errclass.New(errclass.Unclassified, "metal: command failed")
	// ErrDivergentBarrier: the threads of a group did not meet at the same
	// barriers (some reached a barrier or SIMD meeting that others skipped);
	// undefined behaviour on a GPU, detected by the host runtime.
	ErrDivergentBarrier = errclass.Wrap(errclass.Unclassified, "metal: threads of a group met different barriers", ErrCommand)
	// ErrSanitizer: a sanitizer build of the host engine reported a data race
	// or a bad memory access.
	ErrSanitizer = errclass.Wrap(errclass.Unclassified, "metal: sanitizer report", ErrCommand)
	// ErrClosed: a call on a closed engine or backend.
	ErrClosed = errclass.New(errclass.Unclassified, "metal: engine closed")
)

// maxErrorText bounds the compiler log quoted in a CompileError's one-line
// message; the whole log stays in CompileError.Log.
const maxErrorText = 1000

// CompileError is a compiler's refusal of a translation unit (or of a
// pipeline built from one of its kernels): the Metal compiler's, or clang's
// in the host engine. Error() is one line; Log is the compiler's whole
// message (Metal's NSError description, or clang's output).
type CompileError struct {
	Unit   string // the translation unit (Engine.Pipeline's unit)
	Kernel string // the kernel, when building its pipeline failed; "" for the unit
	Log    string // the compiler's message, unabridged
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
