package metal

import "github.com/dgq-dev/dgq/runtime/backend"

// Engine is the seam between the Metal backend and what runs its kernels:
// the Metal device on darwin, or the host engine (the same kernels' Metal
// text compiled for the CPU by clang) elsewhere. Everything the backend does
// goes through it; an Engine is used from one goroutine at a time.
type Engine interface {
	// Name says which engine this is and on what ("Apple M2 Max", "host (clang 19)").
	Name() string
	// Alloc returns a zeroed buffer of n bytes in memory both the host and
	// the kernels see (Metal's Shared storage mode).
	Alloc(n int) (Mem, error)
	// Wrap returns a read-only buffer over host bytes without copying them
	// (Metal's no-copy buffers: the caller keeps b alive and unchanged until
	// the Mem is freed; on Metal b must be page-aligned and fit the device's
	// maximum buffer length).
	Wrap(b []byte) (Mem, error)
	// Pipeline returns the compiled kernel of a translation unit: unit names
	// the source (a kernel file, e.g. "rmsnorm.kern"), kernel the function.
	// Compiled units are cached for the Engine's life.
	Pipeline(unit, kernel string) (Pipeline, error)
	// Dispatch queues one launch of p: groups threadgroups of threads
	// threads each (x, y, z), with args bound at buffer indices 0, 1, ….
	// Errors of the launch itself may surface only at the next Sync.
	Dispatch(p Pipeline, groups, threads [3]int, args ...Arg) error
	// Sync runs everything queued and waits for it; it returns the first
	// error any of it met.
	Sync() error
	// Close releases the engine; its Mems and Pipelines are invalid after.
	Close() error
	// Plan is the compile plan the engine builds units under.
	Plan() CompilePlan
	// CompileLog is the compiler's warnings for a unit built without error
	// ("" when none, or not built yet).
	CompileLog(unit string) string
	// Numerics is what the engine's f32 arithmetic may do (the backend's
	// Caps().Numerics).
	Numerics() backend.Numerics
}

// Mem is an Engine buffer.
type Mem interface {
	// Bytes is the buffer's contents as the host sees them (valid between
	// Syncs; a wrapped buffer's are the wrapped bytes).
	Bytes() []byte
	// Free releases the buffer.
	Free()
}

// Pipeline is a compiled kernel.
type Pipeline interface {
	// Name is the kernel function's name.
	Name() string
	// MaxThreads is the most threads a threadgroup of it may have.
	MaxThreads() int
	// ExecutionWidth is its SIMD width (threadExecutionWidth): 32.
	ExecutionWidth() int
	// StaticMemory is the threadgroup memory its kernel declares, in bytes;
	// -1 where the engine cannot tell (the host engine).
	StaticMemory() int
}

// Arg is one kernel argument: a buffer from offset Off, or (when Mem is
// nil) the bytes of a scalar passed by value.
type Arg struct {
	Mem    Mem
	Off    int
	Scalar []byte
}
