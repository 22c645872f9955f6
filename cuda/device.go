package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Device attributes (CUdevice_attribute).
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMultiprocessorCount    = 16
	attrWarpSize               = 10
)

// Device is one CUDA device with its primary context and one stream on which
// every copy, kernel and GEMM of this Device runs in order. A Device may be
// used from several goroutines; its calls are serialized.
type Device struct {
	mu       sync.Mutex
	ordinal  int
	dev      int32
	ctx      uintptr // CUcontext (primary)
	stream   uintptr // CUstream
	name     string
	major    int
	minor    int
	sms      int
	totalMem uint64
	driver   int
	cacheDir string
	blas     uintptr // cublasHandle_t, created at first GEMM
	closed   bool
}

// Open initializes the driver and opens device 0. Where libcuda cannot be
// loaded or no device is usable, the error wraps ErrUnavailable and is one
// line. NVRTC and cuBLAS are loaded later, at the first Compile or GEMM.
func Open() (*Device, error) { return OpenOrdinal(0) }

// OpenOrdinal is Open for the device of the given ordinal.
func OpenOrdinal(ordinal int) (*Device, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := ccall(drv.cuInit, 0); r != 0 {
		return nil, unavailable("%v", check("cuInit", r))
	}
	var count int32
	if err := check("cuDeviceGetCount", ccall(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return nil, unavailable("%v", err)
	}
	if count == 0 {
		return nil, unavailable("no CUDA device")
	}
	if ordinal < 0 || ordinal >= int(count) {
		return nil, unavailable("no CUDA device %d (%d present)", ordinal, count)
	}
	d := &Device{ordinal: ordinal}
	if err := check("cuDeviceGet", ccall(drv.cuDeviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(ordinal))); err != nil {
		return nil, err
	}
	name := make([]byte, 256)
	if err := check("cuDeviceGetName", ccall(drv.cuDeviceGetName, uintptr(unsafe.Pointer(unsafe.SliceData(name))), uintptr(len(name)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	d.name = goString(name)
	var err error
	if d.major, err = d.attr(attrComputeCapabilityMajor); err != nil {
		return nil, err
	}
	if d.minor, err = d.attr(attrComputeCapabilityMinor); err != nil {
		return nil, err
	}
	if d.sms, err = d.attr(attrMultiprocessorCount); err != nil {
		return nil, err
	}
	var total uint64
	if err := check("cuDeviceTotalMem_v2", ccall(drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	d.totalMem = total
	var ver int32
	if err := check("cuDriverGetVersion", ccall(drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&ver)))); err != nil {
		return nil, err
	}
	d.driver = int(ver)
	if err := check("cuDevicePrimaryCtxRetain", ccall(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev))); err != nil {
		return nil, unavailable("%v", err)
	}
	if err := check("cuCtxSetCurrent", ccall(drv.cuCtxSetCurrent, d.ctx)); err != nil {
		ccall(drv.cuDevicePrimaryCtxRelease, uintptr(d.dev))
		return nil, err
	}
	// A blocking stream (flags 0): ordered with the legacy default stream too.
	if err := check("cuStreamCreate", ccall(drv.cuStreamCreate, uintptr(unsafe.Pointer(&d.stream)), 0)); err != nil {
		ccall(drv.cuDevicePrimaryCtxRelease, uintptr(d.dev))
		return nil, err
	}
	d.cacheDir = defaultCacheDir()
	return d, nil
}

func (d *Device) attr(a int) (int, error) {
	var v int32
	err := check("cuDeviceGetAttribute", ccall(drv.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d.dev)))
	return int(v), err
}

// do runs f with the device's context current on a locked OS thread, one
// call at a time.
func (d *Device) do(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: device %d is closed", d.ordinal)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", ccall(drv.cuCtxSetCurrent, d.ctx)); err != nil {
		return err
	}
	return f()
}

// Name is the device's name, e.g. "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// Capability is the compute capability, e.g. (9, 0) on Hopper.
func (d *Device) Capability() (major, minor int) { return d.major, d.minor }

// Arch is the NVRTC architecture of the device, e.g. "sm_90".
func (d *Device) Arch() string { return fmt.Sprintf("sm_%d%d", d.major, d.minor) }

// Multiprocessors is the number of SMs.
func (d *Device) Multiprocessors() int { return d.sms }

// TotalMemory is the device memory in bytes.
func (d *Device) TotalMemory() uint64 { return d.totalMem }

// DriverVersion is the CUDA version the driver supports, e.g. 13000.
func (d *Device) DriverVersion() int { return d.driver }

// FreeMemory returns the free and total device memory in bytes.
func (d *Device) FreeMemory() (free, total uint64, err error) {
	err = d.do(func() error {
		return check("cuMemGetInfo_v2", ccall(drv.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	})
	return free, total, err
}

// afterStream waits for the work queued on the stream, then calls the
// driver's fn (named call) on arg: the release of something that work may
// still use.
func (d *Device) afterStream(call string, fn, arg uintptr) error {
	return d.do(func() error {
		if err := check("cuStreamSynchronize", ccall(drv.cuStreamSynchronize, d.stream)); err != nil {
			return err
		}
		return check(call, ccall(fn, arg))
	})
}

// Sync waits until all work queued on the device's stream has finished.
func (d *Device) Sync() error {
	return d.do(func() error { return check("cuStreamSynchronize", ccall(drv.cuStreamSynchronize, d.stream)) })
}

// Close destroys the cuBLAS handle and the stream and releases the primary
// context. Buffers and modules must not be used afterwards.
func (d *Device) Close() error {
	err := d.do(func() error {
		var first error
		keep := func(e error) {
			if first == nil {
				first = e
			}
		}
		keep(check("cuStreamSynchronize", ccall(drv.cuStreamSynchronize, d.stream)))
		if d.blas != 0 {
			keep(blasCheck("cublasDestroy_v2", ccall(blas.destroy, d.blas)))
			d.blas = 0
		}
		keep(check("cuStreamDestroy_v2", ccall(drv.cuStreamDestroy, d.stream)))
		keep(check("cuDevicePrimaryCtxRelease_v2", ccall(drv.cuDevicePrimaryCtxRelease, uintptr(d.dev))))
		return first
	})
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return err
}
