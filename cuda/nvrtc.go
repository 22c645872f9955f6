package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// nvrtcAPI is libnvrtc's entry points, bound in the order of nvrtcSymbols.
type nvrtcAPI struct {
	version, create, destroy, compile, logSize, log uintptr
	cubinSize, cubin, errString                     uintptr
}

// nvrtcSymbols are the C names of nvrtcAPI's fields, in order.
const nvrtcSymbols = `nvrtcVersion nvrtcCreateProgram nvrtcDestroyProgram nvrtcCompileProgram nvrtcGetProgramLogSize
	nvrtcGetProgramLog nvrtcGetCUBINSize nvrtcGetCUBIN nvrtcGetErrorString`

var (
	nvrtcLib library
	nvrtc    nvrtcAPI
	// nvrtcVer is the loaded NVRTC's version (major, minor).
	nvrtcVer [2]int
)

// loadNVRTC loads libnvrtc once (at the first Compile) and reads its
// version.
func loadNVRTC() error {
	return load(&nvrtcLib, []string{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}, nvrtcSymbols, &nvrtc, func() error {
		var major, minor int32
		if err := nvrtcCheck("nvrtcVersion", ccall(nvrtc.version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)))); err != nil {
			return unavailable("%v", err)
		}
		nvrtcVer = [2]int{int(major), int(minor)}
		return nil
	})
}

// nvrtcCheck turns an nvrtcResult into an error naming call.
func nvrtcCheck(call string, r uintptr) error {
	return libStatus(call, r, "nvrtcResult", nvrtc.errString)
}

// NVRTCVersion loads NVRTC and returns its version, e.g. (13, 0).
func NVRTCVersion() (major, minor int, err error) {
	if err := loadNVRTC(); err != nil {
		return 0, 0, err
	}
	return nvrtcVer[0], nvrtcVer[1], nil
}

// CompileError is a failed NVRTC compilation with its program log.
type CompileError struct {
	Name string
	Err  error
	Log  string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("cuda: compiling %s: %v\n%s", e.Name, e.Err, strings.TrimSpace(e.Log))
}

func (e *CompileError) Unwrap() error { return e.Err }

// nvrtcCompile compiles src to a cubin with the given options and returns
// it with NVRTC's program log: its warnings and notes, "" when it has none.
// The log is read whether or not the compile succeeds; a failed compile's
// is in its *CompileError.
func nvrtcCompile(name, src string, opts []string) (cubin []byte, log string, err error) {
	if err := loadNVRTC(); err != nil {
		return nil, "", err
	}
	csrc, cname := cbytes(src), cbytes(name)
	var prog uintptr
	if err := nvrtcCheck("nvrtcCreateProgram", ccall(nvrtc.create, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(unsafe.SliceData(csrc))), uintptr(unsafe.Pointer(unsafe.SliceData(cname))), 0, 0, 0)); err != nil {
		return nil, "", err
	}
	defer ccall(nvrtc.destroy, uintptr(unsafe.Pointer(&prog)))

	var pin runtime.Pinner
	defer pin.Unpin()
	copts := make([]uintptr, len(opts)+1)
	for i, o := range opts {
		b := cbytes(o)
		pin.Pin(unsafe.SliceData(b))
		copts[i] = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	cerr := nvrtcCheck("nvrtcCompileProgram", ccall(nvrtc.compile, prog, uintptr(len(opts)), uintptr(unsafe.Pointer(unsafe.SliceData(copts)))))
	log = programLog(prog)
	if cerr != nil {
		return nil, "", &CompileError{Name: name, Err: cerr, Log: log}
	}
	var n uint64
	if err := nvrtcCheck("nvrtcGetCUBINSize", ccall(nvrtc.cubinSize, prog, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, log, err
	}
	if n == 0 {
		return nil, log, fmt.Errorf("cuda: compiling %s: NVRTC produced no cubin (is --gpu-architecture a real sm_XX?)", name)
	}
	out := make([]byte, n)
	if err := nvrtcCheck("nvrtcGetCUBIN", ccall(nvrtc.cubin, prog, uintptr(unsafe.Pointer(unsafe.SliceData(out))))); err != nil {
		return nil, log, err
	}
	return out, log, nil
}

// programLog is the program log of an NVRTC program after its compile
// ("" when it is empty or cannot be read: the log only informs).
func programLog(prog uintptr) string {
	var n uint64
	if nvrtcCheck("nvrtcGetProgramLogSize", ccall(nvrtc.logSize, prog, uintptr(unsafe.Pointer(&n)))) != nil || n <= 1 {
		return ""
	}
	buf := make([]byte, n)
	if nvrtcCheck("nvrtcGetProgramLog", ccall(nvrtc.log, prog, uintptr(unsafe.Pointer(unsafe.SliceData(buf))))) != nil {
		return ""
	}
	return goString(buf)
}
