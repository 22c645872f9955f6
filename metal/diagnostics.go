package metal

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// The backend's diagnostics (runtime/backend's optional interfaces, which
// dgq selftest reports): its device, every kernel compiled with its log
// and limits, and a probe of its arithmetic.

var (
	_ backend.DeviceDescriber  = (*metalBackend)(nil)
	_ backend.KernelReporter   = (*metalBackend)(nil)
	_ backend.ArithmeticProber = (*metalBackend)(nil)
)

// DeviceInfo describes the engine's device: the GPU's name and newest
// Apple family (the device engine), or the host engine's modes; the
// compiler is the plan's.
func (b *metalBackend) DeviceInfo() backend.DeviceInfo {
	p := b.e.Plan()
	info := backend.DeviceInfo{Name: b.e.Name(),
		Compiler: fmt.Sprintf("Metal compile plan %s (MSL %s, macOS %d and later)", p.Name, p.LanguageString(), p.MinMacOS)}
	if d, ok := b.e.(interface{ Caps() DeviceCaps }); ok {
		c := d.Caps()
		info.Family = fmt.Sprintf("Apple%d", c.AppleFamily)
		info.Memory = c.RecommendedMaxWorkingSetSize
		info.Notes = map[string]string{"max_buffer_length": fmt.Sprint(c.MaxBufferLength),
			"max_threads_per_threadgroup": fmt.Sprint(c.MaxThreadsPerThreadgroup)}
	}
	if _, host := b.e.(*HostEngine); host {
		info.Family = "host engine: Metal's thread model on the CPU (test build)"
		info.Compiler = "clang, as " + info.Compiler
	}
	return info
}

// KernelReport compiles every unit the backend may launch — the kernel
// files of runtime/kernels and metal/kernels — and builds the pipeline of
// every kernel in each (kernels.ParseSignatures), reporting the compiler's
// warnings, its refusals and each pipeline's limits.
func (b *metalBackend) KernelReport(ctx context.Context) (*backend.KernelReport, error) {
	if err := b.live(); err != nil {
		return nil, err
	}
	r := &backend.KernelReport{}
	for _, unit := range append(kernels.Files(), MetalFiles()...) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.Units = append(r.Units, b.unitReport(unit))
	}
	return r, nil
}

// unitReport compiles one unit and the pipelines of its kernels.
func (b *metalBackend) unitReport(unit string) backend.KernelUnit {
	u := backend.KernelUnit{Name: unit}
	body, err := unitBody(unit)
	if err != nil {
		u.Error = err.Error()
		return u
	}
	sigs, err := kernels.ParseSignatures(unit, body)
	if err != nil {
		u.Error = err.Error()
		return u
	}
	for _, s := range sigs {
		k := backend.KernelInfo{Name: s.Name, Registers: -1}
		p, err := b.e.Pipeline(unit, s.Name)
		if err != nil {
			var ce *CompileError
			if errors.As(err, &ce) && ce.Kernel == "" { // the unit itself did not compile
				u.Error, u.Log = err.Error(), ce.Log
				u.Kernels = nil
				return u
			}
			k.Error = err.Error()
		} else {
			k.MaxThreads, k.SIMDWidth, k.StaticSharedBytes = p.MaxThreads(), p.ExecutionWidth(), p.StaticMemory()
		}
		u.Kernels = append(u.Kernels, k)
	}
	u.Log = b.e.CompileLog(unit)
	return u
}

// ProbeArithmetic runs the arithmetic probe (runtime/kernels' probe.kern)
// on the backend's engine, after the work queued before it.
func (b *metalBackend) ProbeArithmetic() (*backend.Arithmetic, error) {
	if err := b.live(); err != nil {
		return nil, err
	}
	if err := b.e.Sync(); err != nil {
		return nil, err
	}
	return ProbeArithmetic(b.e)
}
