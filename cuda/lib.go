package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// ErrUnavailable is wrapped by every error that means CUDA cannot be used on
// this machine: a library (libcuda, libnvrtc, libcublas) that cannot be
// loaded, a driver that fails to initialize, or no device. Its message is one
// line.
var ErrUnavailable = errors.New("cuda unavailable")

// unavailable builds a one-line ErrUnavailable error.
func unavailable(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	msg = strings.Join(strings.Fields(msg), " ")
	return fmt.Errorf("%w: %s", ErrUnavailable, msg)
}

// libDirs are the folders searched, after the dynamic loader's own search,
// for a library that is not found by its bare name: $DGQ_CUDA_LIB_DIR,
// $CUDA_HOME/lib64, $CUDA_PATH/lib64 and the usual toolkit folders.
func libDirs() []string {
	var dirs []string
	for _, v := range []string{"DGQ_CUDA_LIB_DIR", "CUDA_HOME", "CUDA_PATH"} {
		d := os.Getenv(v)
		if d == "" {
			continue
		}
		if v == "DGQ_CUDA_LIB_DIR" {
			dirs = append(dirs, d)
		} else {
			dirs = append(dirs, filepath.Join(d, "lib64"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
	if g, _ := filepath.Glob("/usr/local/cuda-*/lib64"); len(g) > 0 {
		dirs = append(dirs, g...)
	}
	return dirs
}

// openLib loads the first of names that the dynamic loader finds, first by
// bare name, then in libDirs. It returns the handle and the name loaded.
func openLib(names []string) (uintptr, string, error) {
	if runtime.GOOS != "linux" {
		return 0, "", unavailable("CUDA needs linux, not %s", runtime.GOOS)
	}
	var first error
	for _, n := range names {
		h, err := dlopen(n)
		if err == nil {
			return h, n, nil
		}
		if first == nil {
			first = err
		}
	}
	for _, d := range libDirs() {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if h, err := dlopen(p); err == nil {
				return h, p, nil
			}
		}
	}
	return 0, "", unavailable("cannot load %s (%v)", strings.Join(names, " or "), first)
}

// bind resolves every symbol of syms in the library h.
func bind(h uintptr, lib string, syms map[string]*uintptr) error {
	for name, p := range syms {
		fn, err := dlsym(h, name)
		if err != nil || fn == 0 {
			return unavailable("%s has no symbol %s", lib, name)
		}
		*p = fn
	}
	return nil
}

// cstr copies the NUL-terminated C string at p.
func cstr(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// goString is the NUL-terminated string at the start of b.
func goString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// cbytes returns s as a NUL-terminated byte slice.
func cbytes(s string) []byte { return append([]byte(s), 0) }

// driver is libcuda's entry points.
type driver struct {
	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                   uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute           uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease          uintptr
	cuCtxSetCurrent, cuCtxSynchronize, cuMemGetInfo                                uintptr
	cuMemAlloc, cuMemFree, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync uintptr
	cuMemsetD8Async, cuStreamCreate, cuStreamDestroy, cuStreamSynchronize          uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuLaunchKernel          uintptr
	cuFuncSetAttribute, cuMemAllocHost, cuMemFreeHost                              uintptr
}

var (
	drvOnce sync.Once
	drv     driver
	drvErr  error
)

// loadDriver loads libcuda once.
func loadDriver() error {
	drvOnce.Do(func() {
		h, name, err := openLib([]string{"libcuda.so.1", "libcuda.so"})
		if err != nil {
			drvErr = err
			return
		}
		d := &drv
		drvErr = bind(h, name, map[string]*uintptr{
			"cuInit": &d.cuInit, "cuDriverGetVersion": &d.cuDriverGetVersion,
			"cuGetErrorName": &d.cuGetErrorName, "cuGetErrorString": &d.cuGetErrorString,
			"cuDeviceGetCount": &d.cuDeviceGetCount, "cuDeviceGet": &d.cuDeviceGet,
			"cuDeviceGetName": &d.cuDeviceGetName, "cuDeviceGetAttribute": &d.cuDeviceGetAttribute,
			"cuDeviceTotalMem_v2": &d.cuDeviceTotalMem, "cuDevicePrimaryCtxRetain": &d.cuDevicePrimaryCtxRetain,
			"cuDevicePrimaryCtxRelease_v2": &d.cuDevicePrimaryCtxRelease,
			"cuCtxSetCurrent":              &d.cuCtxSetCurrent, "cuCtxSynchronize": &d.cuCtxSynchronize,
			"cuMemGetInfo_v2": &d.cuMemGetInfo,
			"cuMemAlloc_v2":   &d.cuMemAlloc, "cuMemFree_v2": &d.cuMemFree,
			"cuMemcpyHtoDAsync_v2": &d.cuMemcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &d.cuMemcpyDtoHAsync,
			"cuMemcpyDtoDAsync_v2": &d.cuMemcpyDtoDAsync, "cuMemsetD8Async": &d.cuMemsetD8Async,
			"cuStreamCreate": &d.cuStreamCreate, "cuStreamDestroy_v2": &d.cuStreamDestroy,
			"cuStreamSynchronize": &d.cuStreamSynchronize,
			"cuModuleLoadData":    &d.cuModuleLoadData, "cuModuleUnload": &d.cuModuleUnload,
			"cuModuleGetFunction": &d.cuModuleGetFunction, "cuLaunchKernel": &d.cuLaunchKernel,
			"cuFuncSetAttribute": &d.cuFuncSetAttribute,
			"cuMemAllocHost_v2":  &d.cuMemAllocHost, "cuMemFreeHost": &d.cuMemFreeHost,
		})
	})
	return drvErr
}

// Error is a failed call into the driver, NVRTC or cuBLAS.
type Error struct {
	Call string // the C function, e.g. "cuMemAlloc_v2"
	Code int    // its status code
	Name string // the status's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // the library's description, where it gives one
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Msg != "" && e.Msg != e.Name {
		s += ": " + e.Msg
	}
	return s
}

// check turns a CUresult into an error naming call.
func check(call string, r uintptr) error {
	code := int(int32(r))
	if code == 0 {
		return nil
	}
	e := &Error{Call: call, Code: code, Name: fmt.Sprintf("CUresult %d", code)}
	var p uintptr
	if drv.cuGetErrorName != 0 && int32(ccall(drv.cuGetErrorName, r, uintptr(unsafe.Pointer(&p)))) == 0 {
		e.Name = cstr(p)
	}
	p = 0
	if drv.cuGetErrorString != 0 && int32(ccall(drv.cuGetErrorString, r, uintptr(unsafe.Pointer(&p)))) == 0 {
		e.Msg = cstr(p)
	}
	return e
}
