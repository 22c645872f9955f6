//go:build linux

package metal

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/dgq-dev/dgq/metal/internal/msl"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

var (
	_ Engine   = (*HostEngine)(nil)
	_ Mem      = (*hostMem)(nil)
	_ Pipeline = (*hostPipeline)(nil)
)

// hostMaxThreads is the most threads a host threadgroup may have (Apple
// GPUs' limit, before a pipeline's own).
const hostMaxThreads = 1024

// HostEngine is the Engine that runs the kernels' Metal text on the CPU
// (docs/metal-host.md). Pipeline builds a unit's text — the Metal prelude,
// the common include, the file, then launchers generated from its kernels'
// signatures — with clang 19 against metal_stdlib.h in host mode, into a
// shared library loaded with purego (no cgo). Libraries live in a temporary
// directory of the engine's own, removed by Close: nothing is cached across
// engines, so every engine builds what it uses once (each library's
// threadgroup arrays are its own).
//
// Dispatch checks and queues; Sync runs the queue in order and stops at the
// first error. A launch runs its groups one after another, the 1 to 1024
// threads of a group as fibers on one OS thread (ThreadsFibers, the
// default: hostrt/fibers.c) or as OS threads (ThreadsOS and every sanitizer
// build: hostrt/threads.c). Memory is Go memory (Alloc: 64-byte aligned;
// Wrap: the caller's bytes, read-only to kernels), pinned while the kernels
// run.
type HostEngine struct {
	opts   HostOptions
	clang  msl.Clang
	dir    string
	b      *hostBuilder
	units  map[string]*hostUnit
	queue  []hostLaunch
	closed bool
}

// hostUnit is a built unit.
type hostUnit struct {
	name string
	sigs map[string]kernels.Signature
	path string  // the library or the sanitizer build's executable
	log  string  // clang's warnings
	lib  uintptr // the loaded library (0 with a sanitizer)
}

// hostPipeline is a kernel of a built unit.
type hostPipeline struct {
	e    *HostEngine
	unit *hostUnit
	sig  kernels.Signature
	fn   uintptr // dgq_launch_<name> (0 with a sanitizer)
}

func (p *hostPipeline) Name() string    { return p.sig.Name }
func (p *hostPipeline) MaxThreads() int { return hostMaxThreads }

// ExecutionWidth is 32: the host runtime's SIMD groups.
func (p *hostPipeline) ExecutionWidth() int { return SIMDWidth }

// StaticMemory is -1: the host build does not measure a kernel's
// threadgroup arrays.
func (p *hostPipeline) StaticMemory() int { return -1 }

// hostMem is a host engine buffer.
type hostMem struct {
	e     *HostEngine
	b     []byte
	ro    bool
	freed bool
}

func (m *hostMem) Bytes() []byte  { return m.b }
func (m *hostMem) ReadOnly() bool { return m.ro }

// Free drops the engine's hold on the buffer; a launch already queued keeps
// the bytes it was given (as a Metal command buffer retains its buffers).
func (m *hostMem) Free() {
	m.freed = true
	m.b = nil
}

// hostArg is an argument as queued: a buffer's bytes from the argument's
// offset (the whole buffer kept, for the sanitizer driver), or scalar bytes.
type hostArg struct {
	mem    *hostMem
	buf    []byte // the buffer's bytes at Dispatch
	off    int
	scalar []byte
}

// hostLaunch is a queued launch.
type hostLaunch struct {
	p       *hostPipeline
	groups  [3]int
	threads [3]int
	args    []hostArg
}

// NewHostEngine returns a host engine. Without clang 19 the error wraps
// ErrHostUnavailable and msl.ErrNoClang; without the asked sanitizer's
// runtime, ErrHostUnavailable.
func NewHostEngine(opts HostOptions) (*HostEngine, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cl, err := msl.FindClang()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHostUnavailable, err)
	}
	dir, err := os.MkdirTemp("", "dgq-metal-host-")
	if err != nil {
		return nil, fmt.Errorf("metal: host engine: %w", err)
	}
	b, err := newHostBuilder(context.Background(), cl, dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &HostEngine{opts: opts, clang: cl, dir: dir, b: b, units: map[string]*hostUnit{}}, nil
}

// Plan is the compile plan whose text the engine builds.
func (e *HostEngine) Plan() CompilePlan { return e.opts.plan() }

// CompileLog is clang's warnings for a unit the engine built ("" when
// none, or not built yet).
func (e *HostEngine) CompileLog(unit string) string {
	if u, ok := e.units[unit]; ok {
		return u.log
	}
	return ""
}

// Numerics is what the engine's options let its arithmetic do: IEEE with
// glibc's math functions by default, MSL's bounds with SpecMath (AppleGPU),
// subnormals flushed with FlushSubnormals.
func (e *HostEngine) Numerics() backend.Numerics { return e.opts.numerics() }

// Name says "host (clang 19.1.7)", followed by what differs from the
// default options: the sanitizer, OS threads, the SIMD order, flushed
// subnormals, the math functions at MSL's bounds, contraction, another
// compile plan ("host (clang 19.1.7, SIMD reversed, subnormals flushed)").
func (e *HostEngine) Name() string {
	parts := []string{"clang " + e.clang.Version}
	if e.opts.Sanitizer != SanitizeNone {
		parts = append(parts, e.opts.Sanitizer.String()+" sanitizer")
	} else if e.opts.Threads != ThreadsFibers {
		parts = append(parts, e.opts.Threads.String())
	}
	if e.opts.SIMDOrder != SIMDButterfly {
		parts = append(parts, "SIMD "+e.opts.SIMDOrder.String())
	}
	if e.opts.FlushSubnormals {
		parts = append(parts, "subnormals flushed")
	}
	if e.opts.SpecMath {
		parts = append(parts, "math at MSL's bounds")
	}
	if e.opts.Contract {
		parts = append(parts, "contraction on")
	}
	if p := e.opts.plan(); p.Name != PlanMacOS15.Name {
		parts = append(parts, "plan "+p.Name)
	}
	return "host (" + strings.Join(parts, ", ") + ")"
}

// Alloc returns n zeroed bytes, 64-byte aligned.
func (e *HostEngine) Alloc(n int) (Mem, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: Alloc of %d bytes", ErrArgument, n)
	}
	const align = 64
	words := make([]uint64, (n+2*align)/8)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	skip := int((align - uintptr(unsafe.Pointer(&raw[0]))%align) % align)
	return &hostMem{e: e, b: raw[skip : skip+n : skip+n]}, nil
}

// Wrap returns a read-only buffer over b (not copied): BUF parameters refuse
// it (ErrReadOnly).
func (e *HostEngine) Wrap(b []byte) (Mem, error) {
	if e.closed {
		return nil, ErrClosed
	}
	return &hostMem{e: e, b: b, ro: true}, nil
}

// unit returns a unit, building it at first use.
func (e *HostEngine) unit(name string) (*hostUnit, error) {
	if u, ok := e.units[name]; ok {
		return u, nil
	}
	src, ok := e.opts.Units[name]
	if !ok {
		s, err := unitBody(name)
		if err != nil {
			return nil, err
		}
		src = s
	}
	sigs, err := kernels.ParseSignatures(name, src)
	if err != nil {
		return nil, fmt.Errorf("metal: host engine: %w", err)
	}
	text := Unit(e.opts.plan(), name, src) + hostLaunchers(sigs)
	path, log, err := e.b.build(context.Background(), name, text)
	if err != nil {
		return nil, err
	}
	u := &hostUnit{name: name, path: path, log: log, sigs: map[string]kernels.Signature{}}
	for _, s := range sigs {
		u.sigs[s.Name] = s
	}
	if e.opts.Sanitizer == SanitizeNone {
		u.lib, err = purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			return nil, fmt.Errorf("%w: loading %s: %w", ErrCompile, name, err)
		}
	}
	e.units[name] = u
	return u, nil
}

// Pipeline returns kernel of unit, building the unit at first use.
func (e *HostEngine) Pipeline(unit, kernel string) (Pipeline, error) {
	if e.closed {
		return nil, ErrClosed
	}
	u, err := e.unit(unit)
	if err != nil {
		return nil, err
	}
	sig, ok := u.sigs[kernel]
	if !ok {
		return nil, fmt.Errorf("%w: %s in %s", ErrNoKernel, kernel, unit)
	}
	p := &hostPipeline{e: e, unit: u, sig: sig}
	if u.lib != 0 {
		p.fn, err = purego.Dlsym(u.lib, "dgq_launch_"+kernel)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCompile, kernel, err)
		}
	}
	return p, nil
}

// Dispatch checks a launch (checkDispatch) and queues it.
func (e *HostEngine) Dispatch(p Pipeline, groups, threads [3]int, args ...Arg) error {
	if e.closed {
		return ErrClosed
	}
	hp, ok := p.(*hostPipeline)
	if !ok || hp.e != e {
		return fmt.Errorf("%w: pipeline %T", ErrForeign, p)
	}
	own := func(m Mem) bool {
		hm, ok := m.(*hostMem)
		return ok && hm.e == e && !hm.freed
	}
	if err := checkDispatch(hp.sig, hostMaxThreads, groups, threads, args, own); err != nil {
		return err
	}
	l := hostLaunch{p: hp, groups: groups, threads: threads, args: make([]hostArg, len(args))}
	for i, a := range args {
		if a.Mem == nil {
			l.args[i].scalar = append([]byte(nil), a.Scalar...)
			continue
		}
		m := a.Mem.(*hostMem)
		l.args[i] = hostArg{mem: m, buf: m.b, off: a.Off}
	}
	e.queue = append(e.queue, l)
	return nil
}

// Sync runs the queued launches in order and returns the first error
// (the launches after it are dropped).
func (e *HostEngine) Sync() error {
	if e.closed {
		return ErrClosed
	}
	q := e.queue
	e.queue = nil
	for _, l := range q {
		var err error
		if e.opts.Sanitizer == SanitizeNone {
			err = runLoaded(l)
		} else {
			err = e.runSanitized(context.Background(), l)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", l.p.sig.Name, err)
		}
	}
	return nil
}

// Close unloads the libraries and removes the build directory.
func (e *HostEngine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.queue = nil
	var first error
	for _, u := range e.units {
		if u.lib != 0 {
			if err := purego.Dlclose(u.lib); err != nil && first == nil {
				first = fmt.Errorf("metal: unloading %s: %w", u.name, err)
			}
		}
	}
	if err := os.RemoveAll(e.dir); err != nil && first == nil {
		first = fmt.Errorf("metal: host engine: %w", err)
	}
	return first
}

// runLoaded runs a launch through its unit's library: the buffers pinned,
// args[i] a buffer's address or the address of an 8-byte slot holding the
// scalar.
func runLoaded(l hostLaunch) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	n := len(l.args)
	ptrs := make([]uintptr, n)
	slots := make([]uint64, n)
	for i, a := range l.args {
		if a.scalar != nil {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&slots[i])), 8), a.scalar)
			ptrs[i] = uintptr(unsafe.Pointer(&slots[i]))
			continue
		}
		if cap(a.buf) == 0 {
			continue // an empty wrapped buffer: a null pointer the kernel may not read
		}
		base := unsafe.SliceData(a.buf[:cap(a.buf)])
		pin.Pin(base)
		ptrs[i] = uintptr(unsafe.Pointer(base)) + uintptr(a.off)
	}
	dims := []uint32{uint32(l.groups[0]), uint32(l.groups[1]), uint32(l.groups[2]),
		uint32(l.threads[0]), uint32(l.threads[1]), uint32(l.threads[2])}
	pin.Pin(&ptrs[0])
	pin.Pin(&slots[0])
	pin.Pin(&dims[0])
	r, _, _ := purego.SyscallN(l.p.fn, uintptr(unsafe.Pointer(&ptrs[0])), uintptr(unsafe.Pointer(&dims[0])))
	return launchError(int32(r))
}

// launchError maps a runtime result (hostrt/runtime.h's DGQ_ERR_*) to an
// error.
func launchError(rc int32) error {
	switch rc {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: the runtime refused the geometry", ErrGeometry)
	case 2:
		return fmt.Errorf("%w: cannot create the group's threads", ErrCommand)
	case 3:
		return ErrDivergentBarrier
	case 4:
		return fmt.Errorf("%w: out of memory", ErrCommand)
	}
	return fmt.Errorf("%w: runtime result %d", ErrCommand, rc)
}
