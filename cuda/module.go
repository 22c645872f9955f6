package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"
)

// cacheVersion changes when the cache key or file format changes.
const cacheVersion = "dgq-cuda-cache-1"

func defaultCacheDir() string {
	if d := os.Getenv("DGQ_CUDA_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "dgq", "cuda")
}

// SetCacheDir sets the folder of the compiled-kernel cache; "" turns the
// cache off. The default is $DGQ_CUDA_CACHE, else os.UserCacheDir()/dgq/cuda.
func (d *Device) SetCacheDir(dir string) {
	d.mu.Lock()
	d.cacheDir = dir
	d.mu.Unlock()
}

// CacheDir is the folder of the compiled-kernel cache ("" when off).
func (d *Device) CacheDir() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cacheDir
}

// Module is a loaded cubin.
type Module struct {
	d      *Device
	h      uintptr // CUmodule
	funcs  map[string]uintptr
	Name   string
	Key    string // the cache key (hex sha256)
	Cached bool   // the cubin was read from the on-disk cache
	// Log is NVRTC's program log of the compile that made the cubin: its
	// warnings, "" when it had none. A cubin read from the cache (Cached)
	// has no log.
	Log string
}

// cacheKey is the sha256 of everything that determines the cubin.
func (d *Device) cacheKey(name, src string, opts []string) string {
	h := sha256.New()
	for _, s := range []string{cacheVersion, name, src, strings.Join(opts, "\x00"), d.Arch(),
		strconv.Itoa(nvrtcVer[0]) + "." + strconv.Itoa(nvrtcVer[1])} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Compile compiles CUDA C++ source with NVRTC for the device's architecture
// (compileOptions: --gpu-architecture=sm_XX and --std=c++17 before opts) and
// loads the cubin. The cubin is cached on disk under CacheDir, keyed by
// sha256 of the source, the options, the architecture and the NVRTC
// version; a later Compile of the same input loads it without compiling.
// Errors from NVRTC carry the program log (*CompileError); a compile that
// succeeds keeps its log in Module.Log.
func (d *Device) Compile(name, src string, opts ...string) (*Module, error) {
	return d.compile(name, src, opts, true)
}

// compileOptions are the NVRTC options of a Compile with opts: the device's
// architecture and the C++ standard, then opts.
func (d *Device) compileOptions(opts []string) []string {
	return append([]string{"--gpu-architecture=" + d.Arch(), "--std=c++17"}, opts...)
}

// compile is Compile; with readCache false it compiles even where the cache
// holds the cubin (which it then writes again), so that the module has
// NVRTC's log.
func (d *Device) compile(name, src string, opts []string, readCache bool) (*Module, error) {
	if err := loadNVRTC(); err != nil {
		return nil, err
	}
	all := d.compileOptions(opts)
	key := d.cacheKey(name, src, all)
	dir := d.CacheDir()
	var path string
	if dir != "" {
		path = filepath.Join(dir, key+".cubin")
		if readCache {
			if img, err := os.ReadFile(path); err == nil {
				if m, err := d.load(img); err == nil {
					m.Name, m.Key, m.Cached = name, key, true
					return m, nil
				}
			}
		}
	}
	img, log, err := nvrtcCompile(name, src, all)
	if err != nil {
		return nil, err
	}
	m, err := d.load(img)
	if err != nil {
		return nil, err
	}
	m.Name, m.Key, m.Log = name, key, log
	if path != "" {
		_ = writeAtomic(dir, path, img) // the cache is an optimization: a failure only costs a compile
	}
	return m, nil
}

func writeAtomic(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

func (d *Device) load(img []byte) (*Module, error) {
	m := &Module{d: d, funcs: map[string]uintptr{}}
	err := d.do(func() error {
		return check("cuModuleLoadData", ccall(drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(unsafe.SliceData(img)))))
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Close unloads the module.
func (m *Module) Close() error {
	if m.h == 0 {
		return nil
	}
	err := m.d.afterStream("cuModuleUnload", drv.cuModuleUnload, m.h)
	m.h = 0
	return err
}

// function looks up a kernel; called inside d.do.
func (m *Module) function(kernel string) (uintptr, error) {
	if f, ok := m.funcs[kernel]; ok {
		return f, nil
	}
	cname := cbytes(kernel)
	var f uintptr
	if err := check("cuModuleGetFunction("+kernel+")", ccall(drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), m.h, uintptr(unsafe.Pointer(unsafe.SliceData(cname))))); err != nil {
		return 0, err
	}
	m.funcs[kernel] = f
	return f, nil
}

const maxStaticShared = 48 << 10

// Launch queues kernel on the device's stream with the given grid and block
// sizes and dynamic shared memory. Arguments, in the kernel's order, may be
// *Buffer or Ptr (a device pointer), int32, uint32, int64, uint64, float32
// or float64; other types (int included: say its width) are refused.
func (m *Module) Launch(kernel string, grid, block [3]uint32, sharedBytes uint32, args ...any) error {
	if m.h == 0 {
		return fmt.Errorf("cuda: launch %s: module closed", kernel)
	}
	vals := make([]uint64, len(args)+1)
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			if v == nil || v.ptr == 0 {
				return fmt.Errorf("cuda: launch %s: argument %d is a nil or freed buffer", kernel, i)
			}
			vals[i] = uint64(v.ptr)
		case Ptr:
			vals[i] = uint64(v)
		case int32:
			vals[i] = uint64(uint32(v))
		case uint32:
			vals[i] = uint64(v)
		case int64:
			vals[i] = uint64(v)
		case uint64:
			vals[i] = v
		case float32:
			vals[i] = uint64(math.Float32bits(v))
		case float64:
			vals[i] = math.Float64bits(v)
		default:
			return fmt.Errorf("cuda: launch %s: argument %d has unsupported type %T", kernel, i, a)
		}
	}
	// Each parameter is read from the start of its 8-byte slot, which holds a
	// 4-byte value in its first bytes on a little-endian host.
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&vals[0])
	params := make([]uintptr, len(args)+1)
	for i := range args {
		params[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	return m.d.do(func() error {
		f, err := m.function(kernel)
		if err != nil {
			return err
		}
		if sharedBytes > maxStaticShared {
			const maxDynamicShared = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
			if err := check("cuFuncSetAttribute", ccall(drv.cuFuncSetAttribute, f, maxDynamicShared, uintptr(sharedBytes))); err != nil {
				return err
			}
		}
		return check("cuLaunchKernel("+kernel+")", ccall(drv.cuLaunchKernel, f,
			uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
			uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
			uintptr(sharedBytes), m.d.stream, uintptr(unsafe.Pointer(unsafe.SliceData(params))), 0))
	})
}
