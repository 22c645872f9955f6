package metal

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/ebitengine/purego/objc"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// DeviceEngine is the Engine over the system's default Metal device: Shared
// buffers, no-copy buffers over host memory, kernels compiled from Metal
// source with safe math, and dispatches queued on one command queue.
//
// # Batches
//
// Dispatches are encoded into one compute command encoder of one command
// buffer (serial dispatch: each sees the results of the ones before it),
// committed and waited for at Sync. A caller keeps a batch to about one
// model step: a command buffer that runs longer than the system allows is
// ended by the GPU watchdog (MTLCommandBufferErrorTimeout). As a bound for
// callers that queue far more, a command buffer is committed (not waited
// for) every maxDispatchesPerBuffer dispatches; Sync waits for all of them.
//
// # Ownership
//
// The engine owns (+1) its device, command queue, compiled libraries,
// pipeline states and every Mem it returned that is not yet freed; Close
// releases them all. The open batch's command buffer and encoder, which
// Metal autoreleases, are retained until the batch is committed (encoder)
// and waited for (command buffer).
type DeviceEngine struct {
	dev, queue objc.ID // owned
	caps       DeviceCaps
	source     func(unit string, plan CompilePlan) (string, error)
	plan       CompilePlan // chosen at open for this system

	libraries map[string]objc.ID              // unit → MTLLibrary, owned
	logs      map[string]string               // unit → the compiler's warnings
	pipelines map[pipelineKey]*devicePipeline // owned pipeline states
	mems      map[*deviceMem]struct{}         // live buffers, released by Close

	cb, enc  objc.ID   // the open batch (retained), 0 when none
	queued   int       // dispatches encoded into cb
	inflight []objc.ID // committed command buffers not yet waited for (retained)
	closed   bool
}

// OpenDevice opens the system's default Metal device and a command queue
// on it. It fails with an error wrapping ErrUnavailable, in one line, where
// Metal cannot run dgq's kernels: not an arm64 build, a framework or the
// device missing, or a device without unified memory and the Apple7 and
// Metal 3 families (Apple silicon on macOS 13 or later).
func OpenDevice(o Options) (*DeviceEngine, error) {
	if runtime.GOARCH != "arm64" {
		return nil, fmt.Errorf("%w: needs macOS on Apple silicon (this is a darwin/%s build)", ErrUnavailable, runtime.GOARCH)
	}
	if err := load(); err != nil {
		return nil, err
	}
	e := &DeviceEngine{
		source:    o.Source,
		libraries: map[string]objc.ID{},
		logs:      map[string]string{},
		pipelines: map[pipelineKey]*devicePipeline{},
		mems:      map[*deviceMem]struct{}{},
	}
	if e.source == nil {
		e.source = defaultSource
	}
	err := inPool(func() error {
		// MTLCreateSystemDefaultDevice: a C "Create" function, so +1.
		if e.dev = lib.createSystemDefaultDevice(); e.dev == 0 {
			return fmt.Errorf("%w: needs macOS on Apple silicon: MTLCreateSystemDefaultDevice found no device", ErrUnavailable)
		}
		e.caps = readCaps(e.dev)
		if missing := e.caps.missing(); missing != "" {
			return fmt.Errorf("%w: needs macOS on Apple silicon: device %q lacks %s", ErrUnavailable, e.caps.Name, missing)
		}
		if e.queue = e.dev.Send(sel.newCommandQueue); e.queue == 0 { // new…: +1
			return fmt.Errorf("%w: device %q gave no command queue", ErrUnavailable, e.caps.Name)
		}
		e.plan = choosePlan()
		return nil
	})
	if err != nil {
		_ = inPool(func() error { release(e.queue); release(e.dev); return nil })
		return nil, err
	}
	return e, nil
}

// readCaps reads what the engine needs of the device (inside a pool).
func readCaps(dev objc.ID) DeviceCaps {
	t := objc.Send[mtlSize](dev, sel.maxThreadsPerThreadgroup) // a 24-byte struct result, through x8
	family := 0
	for f := 12; f >= 7 && family == 0; f-- { // MTLGPUFamilyApple<f> = 1000 + f; unknown values answer NO
		if objc.Send[bool](dev, sel.supportsFamily, 1000+f) {
			family = f
		}
	}
	return DeviceCaps{
		AppleFamily:                  family,
		Name:                         goString(dev.Send(sel.name)), // autoreleased NSString
		MaxBufferLength:              uint64(objc.Send[uint](dev, sel.maxBufferLength)),
		MaxThreadsPerThreadgroup:     [3]int{int(t.Width), int(t.Height), int(t.Depth)},
		RecommendedMaxWorkingSetSize: objc.Send[uint64](dev, sel.recommendedMaxWorkingSetSize),
		UnifiedMemory:                objc.Send[bool](dev, sel.hasUnifiedMemory), // BOOL: read as bool
		Apple7:                       objc.Send[bool](dev, sel.supportsFamily, int(mtlGPUFamilyApple7)),
		Metal3:                       objc.Send[bool](dev, sel.supportsFamily, int(mtlGPUFamilyMetal3)),
		PageSize:                     os.Getpagesize(), // 16 KiB on Apple silicon
	}
}

// missing lists what the engine requires and c lacks ("" when nothing).
func (c DeviceCaps) missing() string {
	var m []string
	if !c.Apple7 {
		m = append(m, "the Apple7 GPU family (M1 or later)")
	}
	if !c.Metal3 {
		m = append(m, "the Metal 3 family (macOS 13 or later)")
	}
	if !c.UnifiedMemory {
		m = append(m, "unified memory")
	}
	if c.PageSize <= 0 || ApplePageSize%c.PageSize != 0 {
		m = append(m, fmt.Sprintf("a page size dividing %d (it is %d)", ApplePageSize, c.PageSize))
	}
	return strings.Join(m, ", ")
}

// Name is the device's name ("Apple M2 Max").
func (e *DeviceEngine) Name() string { return e.caps.Name }

// Caps is what OpenDevice read of the device.
func (e *DeviceEngine) Caps() DeviceCaps { return e.caps }

// Numerics is AppleGPU: what MSL allows an Apple GPU's f32 arithmetic.
func (e *DeviceEngine) Numerics() backend.Numerics { return AppleGPU }

// Close waits for the queued work (Sync), then releases every buffer,
// pipeline and library the engine made, its queue and its device. It
// returns the Sync's error; a second Close does nothing.
func (e *DeviceEngine) Close() error {
	if e.closed {
		return nil
	}
	err := e.Sync()
	_ = inPool(func() error {
		for m := range e.mems {
			release(m.buf)
			m.buf, m.b = 0, nil
		}
		for _, p := range e.pipelines {
			release(p.state)
			p.state = 0
		}
		for _, l := range e.libraries {
			release(l)
		}
		release(e.queue)
		release(e.dev)
		return nil
	})
	e.mems, e.pipelines, e.libraries, e.logs = nil, nil, nil, nil
	e.queue, e.dev, e.closed = 0, 0, true
	if err != nil {
		return fmt.Errorf("metal: closing %s: %w", e.caps.Name, err)
	}
	return nil
}
