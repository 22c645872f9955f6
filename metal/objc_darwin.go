package metal

import (
	"fmt"
	"runtime"
	"structs"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// How the package talks to Metal without cgo: purego opens the frameworks
// and calls their C functions, and purego's objc package sends Objective-C
// messages (objc_msgSend) to Metal's objects. Every pitfall this file and
// its users handle is written where it is handled; in short:
//
//   - Frameworks. Metal.framework holds MTLCreateSystemDefaultDevice and the
//     Metal classes; CoreGraphics.framework must be loaded too, or a process
//     that draws nothing (a command-line tool) gets no default device
//     (Apple: MTLCreateSystemDefaultDevice). libobjc gives objc_msgSend and
//     the autorelease pool functions.
//   - objc_msgSend is called with the exact C prototype of the method it
//     reaches, never as a C variadic function: on Apple arm64 variadic
//     arguments go on the stack, where the method does not look. purego's
//     "args ...any" is expanded into ordinary arguments, and the hot-path
//     prototypes are registered once as typed Go functions (lib below).
//   - objc.Send[T] registers a new function at every call (reflection), so
//     it is used only where a call is rare (opening, compiling); ID.Send
//     (pointer-sized result) and the typed functions elsewhere.
//   - BOOL is C's bool on arm64: only the low byte of the result register is
//     defined, so a BOOL result is read as a Go bool (objc.Send[bool]), never
//     as an ID compared with 0. BOOL arguments are passed as Go bools.
//   - NSUInteger and NSInteger are 64 bits: Go uint and int.
//   - MTLSize (three NSUIntegers, 24 bytes) is passed and returned by value.
//     AAPCS64 passes a composite of more than 16 bytes as a pointer to a copy
//     the caller makes, and returns one through the memory x8 points to;
//     purego does both for a Go struct of the same layout (mtlSize).
//   - An NSError** out-parameter is a heap-allocated objc.ID (never a Go
//     stack slot), and it is read only when the method returned nil: on
//     success Metal may leave it untouched, or fill it with warnings.
//   - Ownership follows Cocoa's rule: an object from a method named new…,
//     alloc…, copy… or from a C function named …Create… is owned (+1) and
//     released exactly once (release); any other object is autoreleased,
//     valid until the enclosing autorelease pool drains, and retained when
//     it is kept longer (the command buffer and its encoder).
//   - Autorelease pools: every entry point runs inside its own pool, pushed
//     and popped on one OS thread (runtime.LockOSThread), since a pool must
//     be popped on the thread that pushed it (inPool).
//   - Strings: a Go string passed as an argument is copied by purego into a
//     NUL-terminated C string for the call; NSString's UTF8String result is
//     copied into a Go string before the pool drains.

// Framework and library paths (stable system paths on macOS).
const (
	metalPath        = "/System/Library/Frameworks/Metal.framework/Metal"
	coreGraphicsPath = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
	objcPath         = "/usr/lib/libobjc.A.dylib"
)

// mtlSize is Metal's MTLSize: width, height, depth as NSUIntegers, in C
// layout (24 bytes; passed by value, see above).
type mtlSize struct {
	_                    structs.HostLayout
	Width, Height, Depth uint64
}

func sizeOf(v [3]int) mtlSize {
	return mtlSize{Width: uint64(v[0]), Height: uint64(v[1]), Depth: uint64(v[2])}
}

// Metal constants (Metal's headers; values are part of the ABI).
const (
	mtlResourceStorageModeShared = 0    // MTLResourceStorageModeShared, default CPU cache mode and hazard tracking
	mtlMathModeSafe              = 0    // MTLMathModeSafe (macOS 15)
	mtlMathFunctionsPrecise      = 1    // MTLMathFloatingPointFunctionsPrecise (macOS 15)
	mtlGPUFamilyApple7           = 1007 // MTLGPUFamilyApple7: A14, M1 and later
	mtlGPUFamilyMetal3           = 5001 // MTLGPUFamilyMetal3 (macOS 13)
	mtlCommandBufferStatusError  = 5    // MTLCommandBufferStatusError
)

// lib holds what load resolves, once per process.
var lib struct {
	once sync.Once
	err  error

	createSystemDefaultDevice func() objc.ID // MTLCreateSystemDefaultDevice: +1
	poolPush                  func() uintptr
	poolPop                   func(uintptr)

	// objc_msgSend under the prototypes of the per-dispatch messages,
	// registered once (objc.Send[T] would rebuild them at every call).
	setBuffer func(enc objc.ID, sel objc.SEL, buf objc.ID, offset, index uint)                         // setBuffer:offset:atIndex:
	setBytes  func(enc objc.ID, sel objc.SEL, p unsafe.Pointer, n, index uint)                         // setBytes:length:atIndex:
	dispatch  func(enc objc.ID, sel objc.SEL, groups, threads mtlSize)                                 // dispatchThreadgroups:threadsPerThreadgroup:
	noCopy    func(dev objc.ID, sel objc.SEL, p unsafe.Pointer, n, opts uint, dealloc uintptr) objc.ID // newBufferWithBytesNoCopy:length:options:deallocator:

	classNSString, classCompileOptions objc.Class
}

// sel holds the selectors, registered by load.
var sel struct {
	alloc, init, release, retain, respondsToSelector objc.SEL
	stringWithUTF8String, utf8String                 objc.SEL
	localizedDescription                             objc.SEL

	name, maxBufferLength, maxThreadsPerThreadgroup     objc.SEL
	recommendedMaxWorkingSetSize, hasUnifiedMemory      objc.SEL
	supportsFamily, newCommandQueue                     objc.SEL
	newBufferWithLength, newBufferWithBytesNoCopy       objc.SEL
	contents                                            objc.SEL
	setLanguageVersion, setMathMode, setFastMathEnabled objc.SEL
	setMathFloatingPointFunctions                       objc.SEL
	newLibraryWithSource, newFunctionWithName           objc.SEL
	newComputePipelineStateWithFunction                 objc.SEL
	maxTotalThreadsPerThreadgroup                       objc.SEL
	threadExecutionWidth, staticThreadgroupMemoryLength objc.SEL

	commandBuffer, computeCommandEncoder, setComputePipelineState objc.SEL
	setBuffer, setBytes, dispatchThreadgroups                     objc.SEL
	endEncoding, commit, waitUntilCompleted, status, errorSel     objc.SEL
}

// load opens the frameworks and resolves every function, class and
// selector the engine uses. It runs once; its error wraps ErrUnavailable.
func load() error {
	lib.once.Do(func() { lib.err = loadOnce() })
	return lib.err
}

func loadOnce() error {
	metal, err := purego.Dlopen(metalPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("%w: cannot load Metal.framework: %v", ErrUnavailable, err)
	}
	// Loaded for its side effect only: without CoreGraphics in the process,
	// MTLCreateSystemDefaultDevice returns nil in a command-line tool.
	if _, err := purego.Dlopen(coreGraphicsPath, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return fmt.Errorf("%w: cannot load CoreGraphics.framework: %v", ErrUnavailable, err)
	}
	libobjc, err := purego.Dlopen(objcPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("%w: cannot load libobjc: %v", ErrUnavailable, err)
	}
	sym := func(handle uintptr, name string) (uintptr, error) {
		p, err := purego.Dlsym(handle, name)
		if err != nil {
			return 0, fmt.Errorf("%w: no symbol %s: %v", ErrUnavailable, name, err)
		}
		return p, nil
	}
	create, err := sym(metal, "MTLCreateSystemDefaultDevice")
	if err != nil {
		return err
	}
	push, err := sym(libobjc, "objc_autoreleasePoolPush")
	if err != nil {
		return err
	}
	pop, err := sym(libobjc, "objc_autoreleasePoolPop")
	if err != nil {
		return err
	}
	send, err := sym(libobjc, "objc_msgSend")
	if err != nil {
		return err
	}
	purego.RegisterFunc(&lib.createSystemDefaultDevice, create)
	purego.RegisterFunc(&lib.poolPush, push)
	purego.RegisterFunc(&lib.poolPop, pop)
	purego.RegisterFunc(&lib.setBuffer, send)
	purego.RegisterFunc(&lib.setBytes, send)
	purego.RegisterFunc(&lib.dispatch, send)
	purego.RegisterFunc(&lib.noCopy, send)

	// The classes exist once Metal.framework (which links Foundation) is
	// loaded.
	if lib.classNSString = objc.GetClass("NSString"); lib.classNSString == 0 {
		return fmt.Errorf("%w: no class NSString", ErrUnavailable)
	}
	if lib.classCompileOptions = objc.GetClass("MTLCompileOptions"); lib.classCompileOptions == 0 {
		return fmt.Errorf("%w: no class MTLCompileOptions", ErrUnavailable)
	}

	r := objc.RegisterName
	sel.alloc, sel.init, sel.release, sel.retain = r("alloc"), r("init"), r("release"), r("retain")
	sel.respondsToSelector = r("respondsToSelector:")
	sel.stringWithUTF8String, sel.utf8String = r("stringWithUTF8String:"), r("UTF8String")
	sel.localizedDescription = r("localizedDescription")
	sel.name, sel.maxBufferLength = r("name"), r("maxBufferLength")
	sel.maxThreadsPerThreadgroup = r("maxThreadsPerThreadgroup")
	sel.recommendedMaxWorkingSetSize, sel.hasUnifiedMemory = r("recommendedMaxWorkingSetSize"), r("hasUnifiedMemory")
	sel.supportsFamily, sel.newCommandQueue = r("supportsFamily:"), r("newCommandQueue")
	sel.newBufferWithLength = r("newBufferWithLength:options:")
	sel.newBufferWithBytesNoCopy = r("newBufferWithBytesNoCopy:length:options:deallocator:")
	sel.contents = r("contents")
	sel.setLanguageVersion, sel.setMathMode = r("setLanguageVersion:"), r("setMathMode:")
	sel.setFastMathEnabled = r("setFastMathEnabled:")
	sel.setMathFloatingPointFunctions = r("setMathFloatingPointFunctions:")
	sel.newLibraryWithSource = r("newLibraryWithSource:options:error:")
	sel.newFunctionWithName = r("newFunctionWithName:")
	sel.newComputePipelineStateWithFunction = r("newComputePipelineStateWithFunction:error:")
	sel.maxTotalThreadsPerThreadgroup = r("maxTotalThreadsPerThreadgroup")
	sel.threadExecutionWidth = r("threadExecutionWidth")
	sel.staticThreadgroupMemoryLength = r("staticThreadgroupMemoryLength")
	sel.commandBuffer, sel.computeCommandEncoder = r("commandBuffer"), r("computeCommandEncoder")
	sel.setComputePipelineState = r("setComputePipelineState:")
	sel.setBuffer, sel.setBytes = r("setBuffer:offset:atIndex:"), r("setBytes:length:atIndex:")
	sel.dispatchThreadgroups = r("dispatchThreadgroups:threadsPerThreadgroup:")
	sel.endEncoding, sel.commit, sel.waitUntilCompleted = r("endEncoding"), r("commit"), r("waitUntilCompleted")
	sel.status, sel.errorSel = r("status"), r("error")
	return nil
}

// inPool runs f inside an autorelease pool on one locked OS thread:
// objects Metal autoreleases during f are released when it returns, and the
// pool is popped on the thread that pushed it.
func inPool(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := lib.poolPush()
	defer lib.poolPop(p)
	return f()
}

// retain takes ownership of an autoreleased object (+1).
func retain(id objc.ID) objc.ID {
	if id != 0 {
		id.Send(sel.retain)
	}
	return id
}

// release gives up an owned object (−1).
func release(id objc.ID) {
	if id != 0 {
		id.Send(sel.release)
	}
}

// nsString returns an autoreleased NSString of s (inside a pool only).
func nsString(s string) objc.ID {
	return objc.ID(lib.classNSString).Send(sel.stringWithUTF8String, s)
}

// goString copies an NSString's UTF-8 text ("" for nil).
func goString(s objc.ID) string {
	if s == 0 {
		return ""
	}
	return objc.Send[string](s, sel.utf8String)
}

// nsErrorText is an NSError's localizedDescription ("" for a nil error:
// the caller says what failed without it).
func nsErrorText(e objc.ID) string {
	if e == 0 {
		return ""
	}
	return goString(e.Send(sel.localizedDescription))
}
