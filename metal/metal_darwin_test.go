package metal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/dgq-dev/dgq/metal"
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
	// mul_add rounds the product and the sum each on its own: safe math
	// and the contraction pragma.
	"exact.metal": `#include <metal_stdlib>
using namespace metal;
#pragma METAL fp contract(off)

kernel void mul_add(device const float* a [[buffer(0)]],
                    device const float* b [[buffer(1)]],
                    device const float* c [[buffer(2)]],
                    device float* out [[buffer(3)]],
                    constant uint& n [[buffer(4)]],
                    uint i [[thread_position_in_grid]]) {
    if (i < n) {
        out[i] = a[i] * b[i] + c[i];
    }
}
`,
	"broken.metal": "kernel void broken(device float* x [[buffer(0)]]) { x[0] = undeclared; }\n",
}

func testSource(unit string) (string, error) {
	if src, ok := testUnits[unit]; ok {
		return src, nil
	}
	return "", fmt.Errorf("no test unit %q", unit)
}

// open opens the device engine over the test units, or skips.
func open(t *testing.T) *metal.DeviceEngine {
	t.Helper()
	e, err := metal.OpenDevice(metal.Options{Source: testSource})
	if errors.Is(err, metal.ErrUnavailable) {
		t.Skipf("no usable Metal device: %v", err)
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

// TestExactArithmetic: with safe math and "#pragma METAL fp contract(off)",
// a*b + c rounds the product and the sum each on its own, bit for bit as Go
// computes float32(a*b) + c, on inputs where a fused multiply-add differs.
func TestExactArithmetic(t *testing.T) {
	e := open(t)
	p := pipeline(t, e, "exact.metal", "mul_add")
	const n = 1 << 16
	r := rand.New(rand.NewPCG(1, 2))
	bufs := [4]metal.Mem{}
	for i := range bufs {
		bufs[i] = alloc(t, e, 4*n)
	}
	vals := [3][]float32{}
	for k := range vals {
		vals[k] = make([]float32, n)
		for i := range n {
			v := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(8))))
			vals[k][i] = v
			binary.LittleEndian.PutUint32(bufs[k].Bytes()[4*i:], math.Float32bits(v))
		}
	}
	args := []metal.Arg{{Mem: bufs[0]}, {Mem: bufs[1]}, {Mem: bufs[2]}, {Mem: bufs[3]}, {Scalar: u32(n)}}
	if err := e.Dispatch(p, [3]int{n / 256, 1, 1}, [3]int{256, 1, 1}, args...); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	fusedDiffers, bad := 0, 0
	for i := range n {
		a, b, c := vals[0][i], vals[1][i], vals[2][i]
		want := float32(a*b) + c
		fused := float32(math.FMA(float64(a), float64(b), float64(c)))
		if fused != want {
			fusedDiffers++
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(bufs[3].Bytes()[4*i:])); math.Float32bits(got) != math.Float32bits(want) {
			if bad++; bad <= 5 {
				t.Errorf("%g·%g + %g = %g, want %g (fused: %g)", a, b, c, got, want, fused)
			}
		}
	}
	t.Logf("%d of %d inputs would differ if contracted; %d differ", fusedDiffers, n, bad)
	if fusedDiffers == 0 {
		t.Fatal("no input tells a fused multiply-add apart")
	}
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
		t.Skipf("no usable Metal device: %v", err)
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
