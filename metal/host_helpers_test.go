//go:build linux

package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/dgq-dev/dgq/metal/internal/msl/msltest"
)

// sharedHost is one host engine for the tests that only run kernels (tests
// run one at a time, and an Engine is used from one goroutine at a time).
var sharedHost struct {
	once sync.Once
	e    *HostEngine
	err  error
}

// testUnits are the small kernels the engine tests run beside the files of
// runtime/kernels.
var testUnits = map[string]string{}

// host returns the shared host engine (built with testUnits), skipping or
// failing as msltest.Require says when clang 19 is missing.
func host(t *testing.T) *HostEngine {
	t.Helper()
	msltest.Require(t)
	sharedHost.once.Do(func() { sharedHost.e, sharedHost.err = NewHostEngine(HostOptions{Units: testUnits}) })
	if sharedHost.err != nil {
		t.Fatal(sharedHost.err)
	}
	return sharedHost.e
}

// TestMain closes the shared engine (removing its build directory).
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedHost.e != nil {
		if err := sharedHost.e.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the shared host engine:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// hostRuntimes are the ways the host runtime runs a group's threads: fibers
// switched by its own assembly (the shared engine, on x86-64), fibers
// switched by swapcontext (what other architectures use), and OS threads.
var hostRuntimes = []struct {
	name   string
	engine func(*testing.T) *HostEngine
}{
	{"fibers", host},
	{"fibers-ucontext", func(t *testing.T) *HostEngine { return newHost(t, HostOptions{Units: testUnits, ucontext: true}) }},
	{"os-threads", func(t *testing.T) *HostEngine { return newHost(t, HostOptions{Units: testUnits, Threads: ThreadsOS}) }},
}

// newHost returns an engine of the test's own, closed at its end.
func newHost(t *testing.T, opts HostOptions) *HostEngine {
	t.Helper()
	msltest.Require(t)
	e, err := NewHostEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// memOf returns a buffer holding vals.
func memOf[T any](t *testing.T, e Engine, vals []T) Mem {
	t.Helper()
	var z T
	m, err := e.Alloc(len(vals) * int(unsafe.Sizeof(z)))
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) > 0 {
		copy(unsafe.Slice((*T)(unsafe.Pointer(&m.Bytes()[0])), len(vals)), vals)
	}
	return m
}

// zeros returns a buffer of n zero values of T.
func zeros[T any](t *testing.T, e Engine, n int) Mem { return memOf(t, e, make([]T, n)) }

// valuesOf copies a buffer's contents out as values of T.
func valuesOf[T any](m Mem) []T {
	var z T
	b := m.Bytes()
	n := len(b) / int(unsafe.Sizeof(z))
	out := make([]T, n)
	if n > 0 {
		copy(out, unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n))
	}
	return out
}

// buf binds a buffer; u32, u64, i32 and f32 bind scalars.
func buf(m Mem) Arg           { return Arg{Mem: m} }
func u32(v uint32) Arg        { return Arg{Scalar: binary.LittleEndian.AppendUint32(nil, v)} }
func i32(v int32) Arg         { return u32(uint32(v)) }
func u64(v uint64) Arg        { return Arg{Scalar: binary.LittleEndian.AppendUint64(nil, v)} }
func f32(v float32) Arg       { return u32(math.Float32bits(v)) }
func grid(x, y, z int) [3]int { return [3]int{x, y, z} }

// run builds (at first use) and runs one kernel, then syncs.
func run(t *testing.T, e Engine, unit, kernel string, groups, threads [3]int, args ...Arg) {
	t.Helper()
	p, err := e.Pipeline(unit, kernel)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(p, groups, threads, args...); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
}

// roundoff is 2^-24, the unit roundoff of f32 (half its ulp at 1).
const roundoff = 1.0 / (1 << 24)
