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

// bind sets the entry points of table, a struct of n uintptr fields, to
// the addresses of the C symbols named in syms (space-separated, in the
// fields' order) in the library h.
func bind(h uintptr, lib, syms string, table unsafe.Pointer, n int) error {
	names := strings.Fields(syms)
	if len(names) != n {
		return fmt.Errorf("cuda: %d symbols named for %d entry points of %s", len(names), n, lib)
	}
	dst := unsafe.Slice((*uintptr)(table), n)
	for i, name := range names {
		fn, err := dlsym(h, name)
		if err != nil || fn == 0 {
			return unavailable("%s has no symbol %s", lib, name)
		}
		dst[i] = fn
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

// driver is libcuda's entry points, bound in the order of driverSymbols.
type driver struct {
	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                   uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute           uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease          uintptr
	cuCtxSetCurrent, cuMemGetInfo                                                  uintptr
	cuMemAlloc, cuMemFree, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync uintptr
	cuMemsetD8Async, cuStreamCreate, cuStreamDestroy, cuStreamSynchronize          uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuLaunchKernel          uintptr
	cuFuncSetAttribute, cuMemAllocHost, cuMemFreeHost, cuFuncGetAttribute          uintptr
}

// driverSymbols are the C names of driver's fields, in order.
const driverSymbols = `cuInit cuDriverGetVersion cuGetErrorName cuGetErrorString cuDeviceGetCount cuDeviceGet
	cuDeviceGetName cuDeviceGetAttribute cuDeviceTotalMem_v2 cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease_v2
	cuCtxSetCurrent cuMemGetInfo_v2 cuMemAlloc_v2 cuMemFree_v2 cuMemcpyHtoDAsync_v2
	cuMemcpyDtoHAsync_v2 cuMemcpyDtoDAsync_v2 cuMemsetD8Async cuStreamCreate cuStreamDestroy_v2 cuStreamSynchronize
	cuModuleLoadData cuModuleUnload cuModuleGetFunction cuLaunchKernel cuFuncSetAttribute cuMemAllocHost_v2 cuMemFreeHost
	cuFuncGetAttribute`

var (
	drvLib library
	drv    driver
)

// entryPoints is the number of uintptr fields of a table of entry points.
func entryPoints[T any](table *T) int {
	var p uintptr
	return int(unsafe.Sizeof(*table) / unsafe.Sizeof(p))
}

// library is a shared library loaded once, with its entry points bound.
type library struct {
	once sync.Once
	err  error
}

// load loads the first of names that the loader finds (openLib), binds the
// entry points of table (a struct of uintptr fields) to the symbols of syms
// in order (bind) and runs after (when not nil), once; it returns the first
// error, every time.
func load[T any](l *library, names []string, syms string, table *T, after func() error) error {
	l.once.Do(func() {
		h, name, err := openLib(names)
		if err == nil {
			err = bind(h, name, syms, unsafe.Pointer(table), entryPoints(table))
		}
		if err == nil && after != nil {
			err = after()
		}
		l.err = err
	})
	return l.err
}

// loadDriver loads libcuda once.
func loadDriver() error {
	return load(&drvLib, []string{"libcuda.so.1", "libcuda.so"}, driverSymbols, &drv, nil)
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

// statusError is the *Error of call's failed status r (kind names an
// unknown status: "CUresult 2"), or nil for status 0.
func statusError(call string, r uintptr, kind string) *Error {
	code := int(int32(r))
	if code == 0 {
		return nil
	}
	return &Error{Call: call, Code: code, Name: fmt.Sprintf("%s %d", kind, code)}
}

// libStatus is statusError as an error, named by the library's function
// nameOf (status → C string; 0 where the library has none).
func libStatus(call string, r uintptr, kind string, nameOf uintptr) error {
	e := statusError(call, r, kind)
	if e == nil {
		return nil
	}
	if nameOf != 0 {
		e.Name = cstr(ccall(nameOf, r))
	}
	return e
}

// check turns a CUresult into an error naming call.
func check(call string, r uintptr) error {
	e := statusError(call, r, "CUresult")
	if e == nil {
		return nil
	}
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
