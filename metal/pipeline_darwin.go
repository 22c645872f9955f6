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
	width      int // threadExecutionWidth
	static     int // staticThreadgroupMemoryLength, bytes
}

// Name is the kernel function's name.
func (p *devicePipeline) Name() string { return p.kernel }

// MaxThreads is the pipeline's maxTotalThreadsPerThreadgroup: the most
// threads a threadgroup of it may have on this device (it depends on the
// kernel's registers and threadgroup memory, so it may be below the
// device's bound).
func (p *devicePipeline) MaxThreads() int { return p.maxThreads }

// ExecutionWidth is the pipeline's threadExecutionWidth, the SIMD width: 32
// (Pipeline refuses any other).
func (p *devicePipeline) ExecutionWidth() int { return p.width }

// StaticMemory is the pipeline's staticThreadgroupMemoryLength: the
// threadgroup memory its kernel declares, in bytes.
func (p *devicePipeline) StaticMemory() int { return p.static }

// Pipeline returns the compute pipeline of kernel in translation unit
// unit, compiling the unit (Options.Source gives its Metal text, under the
// engine's compile plan) on first use. Units and pipelines are cached for
// the engine's life, keyed by (unit, kernel). A unit the compiler refuses
// gives a *CompileError (ErrCompile) with the whole log, and so does one it
// compiles with a warning about a pragma (a floating-point control the
// compiler ignored: the plan would not hold); a missing function
// ErrNoKernel; a pipeline whose threadExecutionWidth is not 32 (the SIMD
// width every kernel assumes) ErrUnavailable.
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
			maxThreads: int(objc.Send[uint](state, sel.maxTotalThreadsPerThreadgroup)),
			width:      int(objc.Send[uint](state, sel.threadExecutionWidth)),
			static:     int(objc.Send[uint](state, sel.staticThreadgroupMemoryLength))}
		if p.width != SIMDWidth {
			release(state)
			return fmt.Errorf("%w: kernel %q of unit %q has a SIMD width (threadExecutionWidth) of %d on %s; dgq's kernels need %d",
				ErrUnavailable, kernel, unit, p.width, e.caps.Name, SIMDWidth)
		}
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
	src, err := e.source(unit, e.plan)
	if err != nil {
		return 0, fmt.Errorf("%w for unit %q: %w", ErrNoSource, unit, err)
	}
	if strings.ContainsRune(src, 0) {
		return 0, fmt.Errorf("%w for unit %q: the text holds a NUL byte", ErrNoSource, unit)
	}
	opts, err := newCompileOptions(e.plan)
	if err != nil {
		return 0, err
	}
	defer release(opts)
	nserr := new(objc.ID)                                                                 // zero: Metal sets it on failure, and on success with warnings
	l := e.dev.Send(sel.newLibraryWithSource, nsString(src), opts, unsafe.Pointer(nserr)) // new…: +1
	if l == 0 {
		return 0, &CompileError{Unit: unit, Log: cmp.Or(nsErrorText(*nserr), "Metal gave no reason")}
	}
	log := nsErrorText(*nserr) // the warnings of a successful compile ("" for none)
	if pragmaWarning(log) {
		release(l)
		return 0, &CompileError{Unit: unit, Log: "the compiler ignored a floating-point pragma of compile plan " + e.plan.Name + ": " + log}
	}
	e.libraries[unit] = l
	e.logs[unit] = log
	return l, nil
}

// newCompileOptions returns MTLCompileOptions (+1) for plan p: its Metal
// language version and no fast math. Metal's default is fast math, which
// lets the compiler reassociate and contract f32 arithmetic and use fast
// approximations of the math functions; dgq's kernels must round every
// product and sum as written where the contract is bit-exact. The macOS 15
// plan sets mathMode Safe with the precise math functions (an error where
// the options lack them: the plan was chosen for a system that has them);
// the macOS 13 plan sets fastMathEnabled NO, which Metal maps to the same.
// Safe math still allows contracting a*b+c within one statement: the
// plan's pragmas turn it off where the contract needs it (CompilePlan).
func newCompileOptions(p CompilePlan) (objc.ID, error) {
	o := objc.ID(lib.classCompileOptions).Send(sel.alloc).Send(sel.init) // alloc…: +1
	o.Send(sel.setLanguageVersion, p.Language)
	if !p.MathMode {
		o.Send(sel.setFastMathEnabled, false) // BOOL argument: a Go bool
		return o, nil
	}
	if !objc.Send[bool](o, sel.respondsToSelector, sel.setMathMode) || // BOOL: read as bool
		!objc.Send[bool](o, sel.respondsToSelector, sel.setMathFloatingPointFunctions) {
		release(o)
		return 0, fmt.Errorf("%w: compile plan %s needs MTLCompileOptions.mathMode (macOS 15)", ErrUnavailable, p.Name)
	}
	o.Send(sel.setMathMode, int(mtlMathModeSafe))
	o.Send(sel.setMathFloatingPointFunctions, int(mtlMathFunctionsPrecise))
	return o, nil
}

// choosePlan is the compile plan of the system: PlanMacOS15 where
// MTLCompileOptions has mathMode (macOS 15 and later: its compiler knows the
// METAL fp pragmas), else PlanMacOS13 (inside a pool).
func choosePlan() CompilePlan {
	o := objc.ID(lib.classCompileOptions).Send(sel.alloc).Send(sel.init) // alloc…: +1
	defer release(o)
	if objc.Send[bool](o, sel.respondsToSelector, sel.setMathMode) {
		return PlanMacOS15
	}
	return PlanMacOS13
}

// CompileLog returns the compiler's warnings for a unit the engine compiled
// ("" when it had none, or the unit is not compiled yet).
func (e *DeviceEngine) CompileLog(unit string) string { return e.logs[unit] }

// Plan is the compile plan the engine chose for this system.
func (e *DeviceEngine) Plan() CompilePlan { return e.plan }
