package metal

import (
	"fmt"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// readOnlyMem is a Mem that kernels must not write (Wrap's).
type readOnlyMem interface {
	Mem
	ReadOnly() bool
}

// checkDispatch checks a launch against its kernel's signature, as both
// engines must before queueing it: groups and threads are counts (threads
// per group 1 to maxThreads in all), every parameter has its argument (a
// buffer for BUF and CBUF that own accepts (this engine's, not freed), not read-only for BUF,
// the offset within the buffer and aligned to the element type; a scalar of
// exactly the type's size for SCALAR). Errors wrap ErrGeometry,
// ErrArgument, ErrReadOnly or ErrForeign.
func checkDispatch(sig kernels.Signature, maxThreads int, groups, threads [3]int, args []Arg, own func(Mem) bool) error {
	nt := 1
	for d := range 3 {
		if groups[d] < 0 || threads[d] < 1 || groups[d] > 1<<31-1 {
			return fmt.Errorf("%w: %s: groups %v, threads %v", ErrGeometry, sig.Name, groups, threads)
		}
		nt *= threads[d]
		if nt > maxThreads {
			return fmt.Errorf("%w: %s: %v threads a group, at most %d", ErrGeometry, sig.Name, threads, maxThreads)
		}
	}
	if len(args) != len(sig.Params) {
		return fmt.Errorf("%w: %s takes %d arguments, got %d", ErrArgument, sig.Name, len(sig.Params), len(args))
	}
	for i, p := range sig.Params {
		a := args[i]
		size, _ := kernels.TypeSize(p.Type)
		if p.Kind == kernels.Scalar {
			if a.Mem != nil || len(a.Scalar) != size {
				return fmt.Errorf("%w: %s: %s wants a %d-byte %s scalar", ErrArgument, sig.Name, p.Name, size, p.Type)
			}
			continue
		}
		if a.Mem == nil || a.Scalar != nil {
			return fmt.Errorf("%w: %s: %s wants a buffer", ErrArgument, sig.Name, p.Name)
		}
		if !own(a.Mem) {
			return fmt.Errorf("%w: %s: %s", ErrForeign, sig.Name, p.Name)
		}
		if n := len(a.Mem.Bytes()); a.Off < 0 || a.Off > n || a.Off%size != 0 {
			return fmt.Errorf("%w: %s: %s at offset %d of a %d-byte buffer (%s elements)", ErrArgument, sig.Name, p.Name, a.Off, n, p.Type)
		}
		if ro, ok := a.Mem.(readOnlyMem); ok && ro.ReadOnly() && p.Kind == kernels.Buf {
			return fmt.Errorf("%w: %s: %s", ErrReadOnly, sig.Name, p.Name)
		}
	}
	return nil
}
