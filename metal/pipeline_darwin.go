package metal

import (
	"cmp"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// pipelineKey names a compiled kernel: its translation unit and function.
type pipelineKey struct{ unit, kernel string }

// devicePipeline is a compiled kernel: an MTLComputePipelineState (owned).
type devicePipeline struct {
	e          *DeviceEngine
	state      objc.ID // owned; 0 once the engine is closed
	kernel     string
	maxThreads int // the pipeline's maxTotalThreadsPerThreadgroup
}

// Name is the kernel function's name.
func (p *devicePipeline) Name() string { return p.kernel }

// MaxThreads is the pipeline's maxTotalThreadsPerThreadgroup: the most
// threads a threadgroup of it may have on this device (it depends on the
// kernel's registers and threadgroup memory, so it may be below the
// device's bound).
func (p *devicePipeline) MaxThreads() int { return p.maxThreads }

// Pipeline returns the compute pipeline of kernel in translation unit
// unit, compiling the unit (Options.Source gives its Metal text) on first
// use. Units and pipelines are cached for the engine's life, keyed by
// (unit, kernel). A unit the compiler refuses gives a *CompileError
// (ErrCompile) with the whole log; a missing function ErrNoKernel.
func (e *DeviceEngine) Pipeline(unit, kernel string) (Pipeline, error) {
	if e.closed {
		return nil, ErrClosed
	}
	key := pipelineKey{unit, kernel}
	if p, ok := e.pipelines[key]; ok {
		return p, nil
	}
	if kernel == "" || strings.ContainsRune(kernel, 0) {
		return nil, fmt.Errorf("%w: kernel name %q", ErrNoKernel, kernel)
	}
	var p *devicePipeline
	err := inPool(func() error {
		library, err := e.library(unit)
		if err != nil {
			return err
		}
		fn := library.Send(sel.newFunctionWithName, nsString(kernel)) // new…: +1
		if fn == 0 {
			return fmt.Errorf("%w: %q in unit %q", ErrNoKernel, kernel, unit)
		}
		defer release(fn) // the pipeline state keeps what it needs
		nserr := new(objc.ID)
		state := e.dev.Send(sel.newComputePipelineStateWithFunction, fn, unsafe.Pointer(nserr)) // new…: +1
		if state == 0 {
			// The NSError is read only now that the call returned nil.
			return &CompileError{Unit: unit, Kernel: kernel, Log: cmp.Or(nsErrorText(*nserr), "Metal gave no reason")}
		}
		p = &devicePipeline{e: e, state: state, kernel: kernel,
			maxThreads: int(objc.Send[uint](state, sel.maxTotalThreadsPerThreadgroup))}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.pipelines[key] = p
	return p, nil
}

// library returns the compiled library of unit, compiling it on first use
// (inside a pool).
func (e *DeviceEngine) library(unit string) (objc.ID, error) {
	if l, ok := e.libraries[unit]; ok {
		return l, nil
	}
	src, err := e.source(unit)
	if err != nil {
		return 0, fmt.Errorf("%w for unit %q: %w", ErrNoSource, unit, err)
	}
	if strings.ContainsRune(src, 0) {
		return 0, fmt.Errorf("%w for unit %q: the text holds a NUL byte", ErrNoSource, unit)
	}
	opts := newCompileOptions()
	defer release(opts)
	nserr := new(objc.ID)
	l := e.dev.Send(sel.newLibraryWithSource, nsString(src), opts, unsafe.Pointer(nserr)) // new…: +1
	if l == 0 {
		// On success the NSError may hold warnings (or be stale): it is
		// read only when no library came back.
		return 0, &CompileError{Unit: unit, Log: cmp.Or(nsErrorText(*nserr), "Metal gave no reason")}
	}
	e.libraries[unit] = l
	return l, nil
}

// newCompileOptions returns MTLCompileOptions (+1) for dgq's kernels: the
// Metal 3.0 language and no fast math. Metal's default is fast math, which
// lets the compiler reassociate and contract f32 arithmetic and use fast
// approximations of the math functions; dgq's kernels must round every
// product and sum as written where the contract is bit-exact. On macOS 15
// and later that is mathMode Safe with the precise math functions; before,
// fastMathEnabled NO (which Metal maps to the same). Safe math still allows
// contracting a*b+c within one statement: an exact kernel also states
// "#pragma METAL fp contract(off)" (the Metal prelude does).
func newCompileOptions() objc.ID {
	o := objc.ID(lib.classCompileOptions).Send(sel.alloc).Send(sel.init) // alloc…: +1
	o.Send(sel.setLanguageVersion, uint(mtlLanguageVersion3_0))
	if objc.Send[bool](o, sel.respondsToSelector, sel.setMathMode) { // BOOL: read as bool
		o.Send(sel.setMathMode, int(mtlMathModeSafe))
		if objc.Send[bool](o, sel.respondsToSelector, sel.setMathFloatingPointFunctions) {
			o.Send(sel.setMathFloatingPointFunctions, int(mtlMathFunctionsPrecise))
		}
	} else {
		o.Send(sel.setFastMathEnabled, false) // BOOL argument: a Go bool
	}
	return o
}
