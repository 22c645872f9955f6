package metal_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dgq-dev/dgq/metal"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// These tests drive the Metal device: run them on a Mac with Apple silicon
// (go test ./metal/...; with MTL_DEBUG_LAYER=1 MTL_SHADER_VALIDATION=1 for
// Metal's own checks, docs/metal.md). Where no usable device exists they
// skip. Elsewhere .ci/darwin only links them.

// testUnits are the Metal sources of the tests, by unit name.
var testUnits = map[string]string{
	// grid_ids writes, for every thread of the grid, its position and a
	// scalar tag: a wrong MTLSize (a pointer read as a width, fields
	// swapped) shows in the positions.
	"grid.metal": `#include <metal_stdlib>
using namespace metal;

kernel void grid_ids(device uint* out [[buffer(0)]],
                     constant uint& tag [[buffer(1)]],
                     uint3 gid [[thread_position_in_grid]],
                     uint3 size [[threads_per_grid]]) {
    uint i = (gid.z * size.y + gid.y) * size.x + gid.x;
    out[4 * i + 0] = gid.x;
    out[4 * i + 1] = gid.y;
    out[4 * i + 2] = gid.z;
    out[4 * i + 3] = tag;
}

kernel void add_one(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    x[i] += 1;
}

kernel void copy_bytes(device const uchar* src [[buffer(0)]],
                       device uchar* dst [[buffer(1)]],
                       constant uint& n [[buffer(2)]],
                       uint i [[thread_position_in_grid]]) {
    if (i < n) {
        dst[i] = src[i];
    }
}
`,
	// A pragma Apple's compiler does not know: a warning, which the engine
	// refuses (a floating-point control it ignored would not hold).
	"pragma.metal": "#include <metal_stdlib>\nusing namespace metal;\n#pragma dgq_no_such_pragma\n" +
		"kernel void k(device float* x [[buffer(0)]]) { x[0] = 1.0f; }\n",
	"broken.metal": "kernel void broken(device float* x [[buffer(0)]]) { x[0] = undeclared; }\n",
}

// testSource is the test units, then the package's own (UnitSourceFor).
func testSource(unit string, plan metal.CompilePlan) (string, error) {
	if src, ok := testUnits[unit]; ok {
		return src, nil
	}
	return metal.UnitSourceFor(unit, plan)
}

// open opens the device engine over the test units and the package's, or
// fails (skips with -metal.optional, or off Apple silicon).
func open(t *testing.T) *metal.DeviceEngine {
	t.Helper()
	e, err := metal.OpenDevice(metal.Options{Source: testSource})
	if errors.Is(err, metal.ErrUnavailable) {
		noDevice(t, err)
	}
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

func pipeline(t *testing.T, e *metal.DeviceEngine, unit, kernel string) metal.Pipeline {
	t.Helper()
	p, err := e.Pipeline(unit, kernel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func alloc(t *testing.T, e *metal.DeviceEngine, n int) metal.Mem {
	t.Helper()
	m, err := e.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func TestDeviceCaps(t *testing.T) {
	e := open(t)
	c := e.Caps()
	t.Logf("%+v", c)
	if c.Name == "" || e.Name() != c.Name || !c.Apple7 || !c.Metal3 || !c.UnifiedMemory || c.MaxBufferLength == 0 ||
		c.PageSize != metal.ApplePageSize || c.RecommendedMaxWorkingSetSize == 0 {
		t.Errorf("caps %+v", c)
	}
	for i, n := range c.MaxThreadsPerThreadgroup {
		if n < 1 {
			t.Errorf("maxThreadsPerThreadgroup[%d] = %d (an MTLSize result read wrongly?)", i, n)
		}
	}
}

// TestDispatchGrid checks that both MTLSize arguments of a dispatch reach
// Metal by value: every thread of several 1-D, 2-D and 3-D grids writes its
// position once, and the tag passed by setBytes.
func TestDispatchGrid(t *testing.T) {
	e := open(t)
	p := pipeline(t, e, "grid.metal", "grid_ids")
	for _, c := range []struct{ groups, threads [3]int }{
		{[3]int{5, 1, 1}, [3]int{64, 1, 1}},
		{[3]int{3, 2, 1}, [3]int{16, 8, 1}},
		{[3]int{3, 2, 2}, [3]int{4, 2, 3}},
		{[3]int{1, 7, 5}, [3]int{2, 3, 4}},
		{[3]int{2, 1, 9}, [3]int{1, 1, 7}},
	} {
		size := [3]int{c.groups[0] * c.threads[0], c.groups[1] * c.threads[1], c.groups[2] * c.threads[2]}
		n := size[0] * size[1] * size[2]
		out := alloc(t, e, 16*n)
		tag := uint32(0xC0DE0000 + n)
		if err := e.Dispatch(p, c.groups, c.threads, metal.Arg{Mem: out}, metal.Arg{Scalar: u32(tag)}); err != nil {
			t.Fatal(err)
		}
		if err := e.Sync(); err != nil {
			t.Fatal(err)
		}
		b := out.Bytes()
		bad := 0
		for z := range size[2] {
			for y := range size[1] {
				for x := range size[0] {
					i := (z*size[1]+y)*size[0] + x
					got := [4]uint32{}
					for k := range got {
						got[k] = binary.LittleEndian.Uint32(b[16*i+4*k:])
					}
					if got != [4]uint32{uint32(x), uint32(y), uint32(z), tag} {
						if bad++; bad <= 5 {
							t.Errorf("groups %v threads %v: cell (%d,%d,%d) holds %v", c.groups, c.threads, x, y, z, got)
						}
					}
				}
			}
		}
		out.Free()
	}
}

// TestBatchOrder queues more dispatches than one command buffer holds,
// each reading what the one before it wrote: serial dispatch within an
// encoder and commit order across command buffers keep every increment.
func TestBatchOrder(t *testing.T) {
	e := open(t)
	p := pipeline(t, e, "grid.metal", "add_one")
	x := alloc(t, e, 4*32)
	const n = 10000
	for range n {
		if err := e.Dispatch(p, [3]int{1, 1, 1}, [3]int{32, 1, 1}, metal.Arg{Mem: x}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range 32 {
		if v := binary.LittleEndian.Uint32(x.Bytes()[4*i:]); v != n {
			t.Fatalf("x[%d] = %d, want %d", i, v, n)
		}
	}
}

// TestExactArithmetic runs the arithmetic probe (runtime/kernels'
// probe.kern through the prelude, under the compile plan the engine chose):
// MUL_RN and ADD_RN round each product and sum on its own, to nearest even,
// on inputs where a fused multiply-add differs; FMA fuses. It logs what the
// compiler does with a plain a*b + c (Safe math may contract it) and
// whether subnormal products are flushed.
func TestExactArithmetic(t *testing.T) {
	e := open(t)
	r, err := metal.ProbeArithmetic(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan %s: %v", e.Plan().Name, r)
	if !r.Exact() {
		t.Errorf("the arithmetic the bit-exact ops need does not hold: %v", r)
	}
}

// TestCompilePlan: the engine chose the plan of this macOS (PlanMacOS15
// from macOS 15 on), and every unit of the package compiles under it with
// no warning about a pragma (Pipeline refuses those: the refusal is shown
// on a unit with an unknown pragma); other warnings are logged.
func TestCompilePlan(t *testing.T) {
	e := open(t)
	major := macOSMajor(t)
	if want := (major >= 15); (e.Plan().Name == metal.PlanMacOS15.Name) != want {
		t.Errorf("macOS %d: plan %s", major, e.Plan().Name)
	}
	t.Logf("macOS %d: compile plan %s (MSL %s)", major, e.Plan().Name, e.Plan().LanguageString())
	for _, unit := range append(kernels.Files(), metal.MetalFiles()...) {
		body, err := metal.UnitSourceFor(unit, e.Plan())
		if err != nil {
			t.Fatal(err)
		}
		sigs, err := kernels.ParseSignatures(unit, body[strings.LastIndex(body, "#line 1 \""+unit+"\""):])
		if err != nil || len(sigs) == 0 {
			t.Fatalf("%s: %d kernels, %v", unit, len(sigs), err)
		}
		p := pipeline(t, e, unit, sigs[0].Name)
		if p.ExecutionWidth() != metal.SIMDWidth {
			t.Errorf("%s: execution width %d", unit, p.ExecutionWidth())
		}
		if log := e.CompileLog(unit); log != "" {
			t.Logf("%s: compiler warnings:\n%s", unit, log)
		}
	}
	_, err := e.Pipeline("pragma.metal", "k")
	var ce *metal.CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "ignored a floating-point pragma") {
		t.Errorf("a unit with an unknown pragma: %v", err)
	}
}

// macOSMajor is this system's macOS major version.
func macOSMajor(t *testing.T) int {
	t.Helper()
	v, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		t.Fatal(err)
	}
	major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if err != nil {
		t.Fatalf("kern.osproductversion %q: %v", v, err)
	}
	return major
}

// TestWrap wraps page-aligned mapped memory without copying (anonymous
// memory, and a read-only file mapping as a pack's blob is) and refuses what
// Metal cannot take.
func TestWrap(t *testing.T) {
	e := open(t)
	page := e.Caps().PageSize
	mapped, err := syscall.Mmap(-1, 0, 4*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mapped)
	for i := range mapped {
		mapped[i] = byte(i*7 + i>>8)
	}
	// A region that starts on a page and ends inside one (rounded up).
	region := mapped[page : 2*page+100]
	w, err := e.Wrap(region)
	if err != nil {
		t.Fatal(err)
	}
	dst := alloc(t, e, len(region))
	p := pipeline(t, e, "grid.metal", "copy_bytes")
	groups := (len(region) + 255) / 256
	if err := e.Dispatch(p, [3]int{groups, 1, 1}, [3]int{256, 1, 1}, metal.Arg{Mem: w}, metal.Arg{Mem: dst}, metal.Arg{Scalar: u32(uint32(len(region)))}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	if string(dst.Bytes()) != string(region) {
		t.Fatal("the kernel did not read the wrapped bytes")
	}
	if &w.Bytes()[0] != &region[0] {
		t.Error("Bytes of a wrapped buffer is not the wrapped memory")
	}
	w.Free()

	// A read-only shared file mapping, as the pack's blob is mapped.
	f, err := os.CreateTemp(t.TempDir(), "blob")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(mapped[:2*page+100]); err != nil {
		t.Fatal(err)
	}
	ro, err := syscall.Mmap(int(f.Fd()), 0, 2*page+100, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(ro)
	wro, err := e.Wrap(ro)
	if err != nil {
		t.Fatalf("wrapping a read-only file mapping: %v", err)
	}
	dst2 := alloc(t, e, len(ro))
	if err := e.Dispatch(p, [3]int{(len(ro) + 255) / 256, 1, 1}, [3]int{256, 1, 1}, metal.Arg{Mem: wro}, metal.Arg{Mem: dst2}, metal.Arg{Scalar: u32(uint32(len(ro)))}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	if string(dst2.Bytes()) != string(ro) {
		t.Fatal("the kernel did not read the wrapped file mapping")
	}
	wro.Free()

	if _, err := e.Wrap(mapped[64 : 64+page]); !errors.Is(err, metal.ErrUnaligned) {
		t.Errorf("unaligned Wrap: %v", err)
	}
	if _, err := e.Alloc(int(e.Caps().MaxBufferLength) + 1); !errors.Is(err, metal.ErrBufferLimit) || !strings.Contains(err.Error(), "maxBufferLength") {
		t.Errorf("Alloc past maxBufferLength: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	e := open(t)
	_, err := e.Pipeline("broken.metal", "broken")
	var ce *metal.CompileError
	if !errors.As(err, &ce) || !errors.Is(err, metal.ErrCompile) || ce.Log == "" || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "undeclared") {
		t.Errorf("a broken unit: %v", err)
	} else {
		t.Logf("one line: %v\nlog:\n%s", err, ce.Log)
	}
	if _, err := e.Pipeline("grid.metal", "no_such_kernel"); !errors.Is(err, metal.ErrNoKernel) {
		t.Errorf("a missing kernel: %v", err)
	}
	if _, err := e.Pipeline("missing.metal", "x"); !errors.Is(err, metal.ErrNoSource) {
		t.Errorf("a missing unit: %v", err)
	}
	p1, p2 := pipeline(t, e, "grid.metal", "add_one"), pipeline(t, e, "grid.metal", "add_one")
	if p1 != p2 || p1.Name() != "add_one" || p1.MaxThreads() < 32 {
		t.Errorf("cache: %v %v, %q, max threads %d", p1, p2, p1.Name(), p1.MaxThreads())
	}
}

func TestDispatchChecks(t *testing.T) {
	e := open(t)
	p := pipeline(t, e, "grid.metal", "add_one")
	x := alloc(t, e, 64)
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"too many threads", e.Dispatch(p, [3]int{1, 1, 1}, [3]int{p.MaxThreads() + 1, 1, 1}, metal.Arg{Mem: x}), metal.ErrGeometry},
		{"offset past end", e.Dispatch(p, [3]int{1, 1, 1}, [3]int{1, 1, 1}, metal.Arg{Mem: x, Off: 65}), metal.ErrArgument},
		{"empty argument", e.Dispatch(p, [3]int{1, 1, 1}, [3]int{1, 1, 1}, metal.Arg{}), metal.ErrArgument},
	} {
		if !errors.Is(c.err, c.want) || !errors.Is(c.err, metal.ErrArgument) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	other := open(t)
	y := alloc(t, other, 64)
	if err := e.Dispatch(p, [3]int{1, 1, 1}, [3]int{1, 1, 1}, metal.Arg{Mem: y}); !errors.Is(err, metal.ErrForeign) {
		t.Errorf("a buffer of another engine: %v", err)
	}
	x.Free()
	if err := e.Dispatch(p, [3]int{1, 1, 1}, [3]int{1, 1, 1}, metal.Arg{Mem: x}); !errors.Is(err, metal.ErrForeign) {
		t.Errorf("a freed buffer: %v", err)
	}
	if err := e.Dispatch(p, [3]int{0, 1, 1}, [3]int{32, 1, 1}, metal.Arg{Mem: alloc(t, e, 128)}); err != nil {
		t.Errorf("an empty grid: %v", err)
	}
}

func TestClose(t *testing.T) {
	e, err := metal.OpenDevice(metal.Options{Source: testSource})
	if errors.Is(err, metal.ErrUnavailable) {
		noDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	m.Free() // released by Close already: a no-op
	if _, err := e.Alloc(16); !errors.Is(err, metal.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
