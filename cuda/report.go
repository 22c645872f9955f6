package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	api "github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// Diagnostics (dgq selftest): the backend describes its device
// (api.DeviceDescriber) and compiles every kernel file to report its
// kernels' limits (api.KernelReporter).

var (
	_ api.DeviceDescriber = (*backend)(nil)
	_ api.DeviceDescriber = (*ownedBackend)(nil)
	_ api.KernelReporter  = (*backend)(nil)
	_ api.KernelReporter  = (*ownedBackend)(nil)
	_ api.RouteRecorder   = (*ownedBackend)(nil)
)

// Function attributes (CUfunction_attribute).
const (
	funcAttrMaxThreadsPerBlock = 0
	funcAttrSharedSizeBytes    = 1
	funcAttrNumRegs            = 4
)

// fileMinMajor is the compute capability (major) a CUDA-specific kernel file
// needs; a backend on an older device never launches it (planKernels'
// q4MMA), and KernelReport does not compile it there.
var fileMinMajor = map[string]int{"moe_mma.cu": 8}

// DeviceInfo describes the device (api.DeviceDescriber): its name,
// architecture ("sm_90"), SMs, memory, the CUDA version the driver
// supports ("13.0") and NVRTC's version, with notes on the backend's
// precision, the NVRTC options of its kernels and the kernel cache.
func (c *backend) DeviceInfo() api.DeviceInfo {
	d := c.d
	info := api.DeviceInfo{Name: d.Name(), Family: d.Arch(), Cores: d.Multiprocessors(), Memory: d.TotalMemory(),
		Driver: driverVersion(d.DriverVersion())}
	if major, minor, err := NVRTCVersion(); err == nil {
		info.Compiler = fmt.Sprintf("NVRTC %d.%d", major, minor)
	}
	prec := PrecisionF32
	if c.k.fast {
		prec = PrecisionBF16
	}
	cache := d.CacheDir()
	if cache == "" {
		cache = "off"
	}
	info.Notes = map[string]string{
		"precision":     prec.String(),
		"nvrtc_options": strings.Join(d.compileOptions(nil), " "),
		"kernel_cache":  cache,
	}
	return info
}

// driverVersion writes cuDriverGetVersion's version (1000·major +
// 10·minor: 13000, 12080) as "13.0", "12.8"; "" for none.
func driverVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// KernelReport compiles every kernel file (KernelFiles) with the options the
// backend compiles it with and reports each kernel's limits
// (api.KernelReporter). Each file is compiled afresh, not read from the
// kernel cache, so that its unit has NVRTC's log (the cubin is written to
// the cache as Compile writes it); the modules are unloaded after, and the
// backend's own modules are left alone. A CUDA-specific file the device is
// too old for (fileMinMajor) is listed, with a log saying so, but not
// compiled. ctx is checked before each file; a closed device or a done ctx
// is the error.
func (c *backend) KernelReport(ctx context.Context) (*api.KernelReport, error) {
	return c.d.kernelReport(ctx)
}

// kernelReport is KernelReport on the device.
func (d *Device) kernelReport(ctx context.Context) (*api.KernelReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cuda: kernel report: %w", err)
	}
	if err := d.do(func() error { return nil }); err != nil {
		return nil, fmt.Errorf("cuda: kernel report: %w", err)
	}
	warp, err := d.attr(attrWarpSize)
	if err != nil {
		return nil, fmt.Errorf("cuda: kernel report: warp size: %w", err)
	}
	files := KernelFiles()
	rep := &api.KernelReport{Units: make([]api.KernelUnit, 0, len(files))}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cuda: kernel report: %w", err)
		}
		rep.Units = append(rep.Units, d.reportUnit(f, warp))
	}
	return rep, nil
}

// reportUnit compiles one kernel file and reports it: its log, its error
// in one line, and the limits of every kernel it defines (kernelNames),
// whose SIMD groups are warps of warp threads.
func (d *Device) reportUnit(file string, warp int) api.KernelUnit {
	u := api.KernelUnit{Name: file, Kernels: []api.KernelInfo{}}
	if need, ok := fileMinMajor[file]; ok {
		if major, _ := d.Capability(); major < need {
			u.Log = fmt.Sprintf("(not compiled: %s needs sm_%d0 or later; a backend on %s never launches it)", file, need, d.Arch())
			return u
		}
	}
	names, nerr := kernelNames(file)
	m, err := d.compileKernel(file, nil, false)
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			u.Log = ce.Log
			err = fmt.Errorf("cuda: compiling %s: %w", ce.Name, ce.Err)
		}
		u.Error = oneLine(err)
		return u
	}
	u.Log = m.Log
	if nerr != nil {
		u.Error = oneLine(nerr)
	}
	u.Kernels = d.kernelLimits(m, names, warp)
	if err := m.Close(); err != nil && u.Error == "" {
		u.Error = oneLine(fmt.Errorf("cuda: unloading %s: %w", file, err))
	}
	return u
}

// kernelNames lists the kernels of a kernel file (KernelFiles): a shared
// dialect file's from its KERNEL declarations (kernels.Signatures),
// moe_mma.cu's those the backend launches (mmaKernels).
func kernelNames(file string) ([]string, error) {
	if file == mmaFile {
		return mmaKernels(), nil
	}
	sigs, err := kernels.Signatures(file)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	names := make([]string, len(sigs))
	for i, s := range sigs {
		names[i] = s.Name
	}
	return names, nil
}

// kernelLimits reads the limits of the kernels names of m; a kernel the
// module lacks, or whose attributes cannot be read, has its error and -1
// for each limit not read.
func (d *Device) kernelLimits(m *Module, names []string, warp int) []api.KernelInfo {
	infos := make([]api.KernelInfo, len(names))
	err := d.do(func() error {
		for i, n := range names {
			infos[i] = funcLimits(m, n, warp)
		}
		return nil
	})
	if err != nil { // the device closed during the report
		for i, n := range names {
			infos[i] = api.KernelInfo{Name: n, MaxThreads: -1, SIMDWidth: warp, StaticSharedBytes: -1, Registers: -1,
				Error: oneLine(err)}
		}
	}
	return infos
}

// funcLimits reads one kernel's limits; called inside d.do.
func funcLimits(m *Module, name string, warp int) api.KernelInfo {
	k := api.KernelInfo{Name: name, MaxThreads: -1, SIMDWidth: warp, StaticSharedBytes: -1, Registers: -1}
	f, err := m.function(name)
	if err != nil {
		k.Error = oneLine(err)
		return k
	}
	var errs []error
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{funcAttrMaxThreadsPerBlock, &k.MaxThreads},
		{funcAttrSharedSizeBytes, &k.StaticSharedBytes},
		{funcAttrNumRegs, &k.Registers},
	} {
		v, err := funcAttr(f, a.attr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*a.dst = v
	}
	if err := errors.Join(errs...); err != nil {
		k.Error = oneLine(err)
	}
	return k
}

// funcAttr reads attribute a of the kernel f (cuFuncGetAttribute); called
// inside d.do.
func funcAttr(f uintptr, a int) (int, error) {
	var v int32
	err := check(fmt.Sprintf("cuFuncGetAttribute(%d)", a), ccall(drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), f))
	return int(v), err
}

// oneLine is err's message on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
