//go:build linux

package metal

import (
	"errors"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// Small kernels that exercise the engine itself; host() builds them beside
// the files of runtime/kernels.
func init() {
	testUnits["geometry.kern"] = `
KERNEL(geometry, BUF(u32, out, 0)) {
	u32 group = (GROUP_ID_Z * NUM_GROUPS_Y + GROUP_ID_Y) * NUM_GROUPS_X + GROUP_ID_X;
	u32 t = (LOCAL_ID_Z * LOCAL_SIZE_Y + LOCAL_ID_Y) * LOCAL_SIZE_X + LOCAL_ID_X;
	DEVICE_MEM u32* o = out + ((u64)group * (LOCAL_SIZE_X * LOCAL_SIZE_Y * LOCAL_SIZE_Z) + t) * 8u;
	o[0] = LOCAL_ID_X;
	o[1] = LOCAL_ID_Y;
	o[2] = LOCAL_ID_Z;
	o[3] = GROUP_ID_X;
	o[4] = GROUP_ID_Y;
	o[5] = GROUP_ID_Z;
	o[6] = LANE_ID;
	o[7] = SIMD_ID;
}
`
	testUnits["simd.kern"] = `
KERNEL(simd_ops, CBUF(float, x, 0), BUF(float, out, 1)) {
	u32 t = LOCAL_ID_X;
	float v = x[t];
	out[3u * t] = SIMD_SUM(v);
	out[3u * t + 1u] = SIMD_MAX(v);
	out[3u * t + 2u] = simd_shuffle_xor(v, (ushort)1);
}
`
	testUnits["shared.kern"] = `
KERNEL(shared_rotate, BUF(u32, out, 0)) {
	SHARED(u32, s, 256);
	u32 t = LOCAL_ID_X;
	u32 n = LOCAL_SIZE_X;
	s[t] = GROUP_ID_X * 1000u + t;
	BARRIER();
	out[GROUP_ID_X * n + t] = s[(t + 1u) % n];
}
`
	testUnits["divergent.kern"] = `
KERNEL(divergent_barrier, BUF(u32, out, 0)) {
	if (LOCAL_ID_X < 16u) BARRIER();
	out[LOCAL_ID_X] = 1u;
}

KERNEL(divergent_simd, BUF(float, out, 0)) {
	float v = 1.0f;
	if (LANE_ID < 8u) v = SIMD_SUM(v);
	out[LOCAL_ID_X] = v;
}

KERNEL(divergent_kinds, BUF(float, out, 0)) {
	float v = 1.0f;
	if (LOCAL_ID_X < 32u) v = SIMD_SUM(v);
	else BARRIER();
	out[LOCAL_ID_X] = v;
}
`
	testUnits["broken.kern"] = "KERNEL(broken, BUF(float, out, 0)) { out[0] = undeclared_thing; }\n"
	testUnits["badsig.kern"] = "KERNEL(badsig, BUF(float, out, 1)) { out[0] = 0.0f; }\n"
}

// TestHostGeometry: every thread of a 3-D launch sees its own position,
// lane and SIMD group (lane = linear index mod 32, as on Apple GPUs).
func TestHostGeometry(t *testing.T) {
	for _, rt := range hostRuntimes {
		t.Run(rt.name, func(t *testing.T) { checkGeometry(t, rt.engine(t)) })
	}
}

func checkGeometry(t *testing.T, e *HostEngine) {
	groups, threads := grid(2, 3, 2), grid(8, 4, 2)
	nt, ng := 8*4*2, 2*3*2
	out := zeros[uint32](t, e, ng*nt*8)
	run(t, e, "geometry.kern", "geometry", groups, threads, buf(out))
	got := valuesOf[uint32](out)
	for gz := range 2 {
		for gy := range 3 {
			for gx := range 2 {
				for lz := range 2 {
					for ly := range 4 {
						for lx := range 8 {
							lin := (lz*4+ly)*8 + lx
							at := (((gz*3+gy)*2+gx)*nt + lin) * 8
							want := []uint32{uint32(lx), uint32(ly), uint32(lz), uint32(gx), uint32(gy), uint32(gz), uint32(lin % 32), uint32(lin / 32)}
							if !slices.Equal(got[at:at+8], want) {
								t.Fatalf("group (%d,%d,%d) thread (%d,%d,%d): %v, want %v", gx, gy, gz, lx, ly, lz, got[at:at+8], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestHostSIMD: SIMD sums, maxima and shuffles over 32-lane SIMD groups,
// and over the 8 lanes of a last, partial one.
func TestHostSIMD(t *testing.T) {
	for _, rt := range hostRuntimes {
		t.Run(rt.name, func(t *testing.T) { checkSIMD(t, rt.engine(t)) })
	}
}

func checkSIMD(t *testing.T, e *HostEngine) {
	const n = 40
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((i*7)%13) - 6
	}
	out := zeros[float32](t, e, 3*n)
	run(t, e, "simd.kern", "simd_ops", grid(1, 1, 1), grid(n, 1, 1), buf(memOf(t, e, x)), buf(out))
	got := valuesOf[float32](out)
	for i := range n {
		lo := i / 32 * 32
		hi := min(lo+32, n)
		sum, mx := float32(0), float32(math.Inf(-1))
		for _, v := range x[lo:hi] {
			sum += v
			mx = max(mx, v)
		}
		if got[3*i] != sum || got[3*i+1] != mx || got[3*i+2] != x[i^1] {
			t.Errorf("lane %d: sum %g max %g xor-1 %g, want %g %g %g", i, got[3*i], got[3*i+1], got[3*i+2], sum, mx, x[i^1])
		}
	}
}

// TestHostSharedMemory: a SHARED array is one per group, seen by all of the
// group's threads after a barrier, and free again for the next group.
func TestHostSharedMemory(t *testing.T) {
	for _, rt := range hostRuntimes {
		t.Run(rt.name, func(t *testing.T) { checkSharedMemory(t, rt.engine(t)) })
	}
}

func checkSharedMemory(t *testing.T, e *HostEngine) {
	const groups, n = 5, 96
	out := zeros[uint32](t, e, groups*n)
	run(t, e, "shared.kern", "shared_rotate", grid(groups, 1, 1), grid(n, 1, 1), buf(out))
	for i, v := range valuesOf[uint32](out) {
		g, th := i/n, i%n
		if want := uint32(g*1000 + (th+1)%n); v != want {
			t.Fatalf("out[%d] = %d, want %d", i, v, want)
		}
	}
}

// TestHostDivergentBarrier: threads of a group that meet different barriers
// (or SIMD exchanges) end the launch with ErrDivergentBarrier, not a hang.
func TestHostDivergentBarrier(t *testing.T) {
	for _, rt := range hostRuntimes {
		t.Run(rt.name, func(t *testing.T) { checkDivergentBarrier(t, rt.engine(t)) })
	}
}

func checkDivergentBarrier(t *testing.T, e *HostEngine) {
	for _, kernel := range []string{"divergent_barrier", "divergent_simd", "divergent_kinds"} {
		t.Run(kernel, func(t *testing.T) {
			p, err := e.Pipeline("divergent.kern", kernel)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Dispatch(p, grid(3, 1, 1), grid(64, 1, 1), buf(zeros[uint32](t, e, 64))); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- e.Sync() }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrDivergentBarrier) {
					t.Errorf("Sync = %v, want ErrDivergentBarrier", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Sync hangs on a divergent barrier")
			}
		})
	}
}

// TestHostWrapAndOffsets: wrapped bytes are read in place; planes of one
// buffer at offsets alias as they do on the device (q8 codes and scales
// re-laid into one buffer, then decoded from it).
func TestHostWrapAndOffsets(t *testing.T) { checkQ8Planes(t, host(t)) }

// checkQ8Planes re-lays a q8 tensor from wrapped pack bytes into one buffer
// of two planes and decodes it from there.
func checkQ8Planes(t *testing.T, e Engine) {
	t.Helper()
	const rows, k = 3, 40
	pack := make([]byte, rows*(k+2))
	want := make([]float32, rows*k)
	for r := range rows {
		scale := float32(0.5 * float64(r+1))
		b := math.Float32bits(scale) >> 16
		pack[r*(k+2)], pack[r*(k+2)+1] = byte(b), byte(b>>8)
		for j := range k {
			c := int8(j*5 - 100)
			pack[r*(k+2)+2+j] = byte(c)
			want[r*k+j] = float32(c) * math.Float32frombits(b<<16)
		}
	}
	src, err := e.Wrap(pack)
	if err != nil {
		t.Fatal(err)
	}
	const scalesAt = 128 // 64-aligned, past the codes
	planes, err := e.Alloc(scalesAt + 4*rows)
	if err != nil {
		t.Fatal(err)
	}
	out := zeros[float32](t, e, rows*k)
	run(t, e, "relayout.kern", "relayout_q8", grid(2, 1, 1), grid(32, 1, 1), buf(src), buf(planes),
		Arg{Mem: planes, Off: scalesAt}, u32(rows), u32(k))
	run(t, e, "dequant.kern", "dequant_q8_f32", grid(2, 1, 1), grid(32, 1, 1), buf(planes),
		Arg{Mem: planes, Off: scalesAt}, buf(out), u32(rows), u32(k))
	if got := valuesOf[float32](out); !slices.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
}

// TestHostErrors: each misuse is refused with its sentinel error.
func TestHostErrors(t *testing.T) {
	e := host(t)
	other := newHost(t, HostOptions{})
	p, err := e.Pipeline("rmsnorm.kern", "rmsnorm_unscaled_f32")
	if err != nil {
		t.Fatal(err)
	}
	x := zeros[float32](t, e, 64)
	ro, _ := e.Wrap(make([]byte, 256))
	foreign := zeros[float32](t, other, 64)
	freed := zeros[float32](t, e, 64)
	freed.Free()
	ok := []Arg{buf(x), buf(x), u32(64), f32(1e-6)}
	with := func(i int, a Arg) []Arg {
		args := slices.Clone(ok)
		args[i] = a
		return args
	}
	dispatch := []struct {
		name            string
		groups, threads [3]int
		args            []Arg
		want            error
	}{
		{"ok", grid(1, 1, 1), grid(64, 1, 1), ok, nil},
		{"too few arguments", grid(1, 1, 1), grid(64, 1, 1), ok[:3], ErrArgument},
		{"short scalar", grid(1, 1, 1), grid(64, 1, 1), with(2, Arg{Scalar: []byte{1, 2}}), ErrArgument},
		{"buffer for a scalar", grid(1, 1, 1), grid(64, 1, 1), with(3, buf(x)), ErrArgument},
		{"scalar for a buffer", grid(1, 1, 1), grid(64, 1, 1), with(0, u32(0)), ErrArgument},
		{"misaligned offset", grid(1, 1, 1), grid(64, 1, 1), with(0, Arg{Mem: x, Off: 2}), ErrArgument},
		{"offset past the end", grid(1, 1, 1), grid(64, 1, 1), with(0, Arg{Mem: x, Off: 260}), ErrArgument},
		{"read-only output", grid(1, 1, 1), grid(64, 1, 1), with(1, buf(ro)), ErrReadOnly},
		{"read-only input", grid(1, 1, 1), grid(64, 1, 1), with(0, buf(ro)), nil},
		{"another engine's buffer", grid(1, 1, 1), grid(64, 1, 1), with(0, buf(foreign)), ErrForeign},
		{"freed buffer", grid(1, 1, 1), grid(64, 1, 1), with(0, buf(freed)), ErrForeign},
		{"no threads", grid(1, 1, 1), grid(0, 1, 1), ok, ErrGeometry},
		{"too many threads", grid(1, 1, 1), grid(64, 32, 1), ok, ErrGeometry},
		{"negative groups", grid(-1, 1, 1), grid(64, 1, 1), ok, ErrGeometry},
		{"no groups", grid(0, 1, 1), grid(64, 1, 1), ok, nil},
	}
	for _, tc := range dispatch {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Dispatch(p, tc.groups, tc.threads, tc.args...)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Dispatch = %v, want %v", err, tc.want)
			}
		})
	}
	if err := e.Sync(); err != nil {
		t.Errorf("Sync of the accepted launches: %v", err)
	}
	pipelines := []struct {
		unit, kernel string
		want         error
	}{
		{"nope.kern", "x", ErrNoSource},
		{"rmsnorm.kern", "nope", ErrNoKernel},
		{"broken.kern", "broken", ErrCompile},
		{"badsig.kern", "badsig", kernels.ErrSignature},
		{"../rmsnorm.kern", "rmsnorm_f32", ErrNoSource},
	}
	for _, tc := range pipelines {
		if _, err := e.Pipeline(tc.unit, tc.kernel); !errors.Is(err, tc.want) {
			t.Errorf("Pipeline(%s, %s) = %v, want %v", tc.unit, tc.kernel, err, tc.want)
		}
	}
	if _, err := e.Pipeline("broken.kern", "broken"); err == nil || !strings.Contains(err.Error(), "undeclared_thing") {
		t.Errorf("a build error should quote clang: %v", err)
	}
	op, err := other.Pipeline("rmsnorm.kern", "rmsnorm_unscaled_f32")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(op, grid(1, 1, 1), grid(64, 1, 1), ok...); !errors.Is(err, ErrForeign) {
		t.Errorf("Dispatch of another engine's pipeline = %v, want ErrForeign", err)
	}
	if _, err := e.Alloc(-1); !errors.Is(err, ErrArgument) {
		t.Errorf("Alloc(-1) = %v, want ErrArgument", err)
	}
}

// TestHostClose: after Close every call says ErrClosed.
func TestHostClose(t *testing.T) {
	e := newHost(t, HostOptions{})
	p, err := e.Pipeline("elementwise.kern", "scale_f32")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Alloc(4); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc = %v", err)
	}
	if _, err := e.Wrap(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Wrap = %v", err)
	}
	if _, err := e.Pipeline("elementwise.kern", "scale_f32"); !errors.Is(err, ErrClosed) {
		t.Errorf("Pipeline = %v", err)
	}
	if err := e.Dispatch(p, grid(1, 1, 1), grid(1, 1, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Dispatch = %v", err)
	}
	if err := e.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync = %v", err)
	}
	if !strings.HasPrefix(e.Name(), "host (clang 19.") {
		t.Errorf("Name = %q", e.Name())
	}
}

// TestHostRuntimeConstants: the launchers' geo[] positions, the thread limit
// and the result codes agree with hostrt/runtime.h.
func TestHostRuntimeConstants(t *testing.T) {
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (DGQ_\w+) (\d+)`).FindAllStringSubmatch(hostRuntimeH, -1) {
		defs[m[1]], _ = strconv.Atoi(m[2])
	}
	want := map[string]int{"DGQ_GEO_LID": geoLID, "DGQ_GEO_GID": geoGID, "DGQ_GEO_LSIZE": geoLSize,
		"DGQ_GEO_NGROUPS": geoNGroups, "DGQ_GEO_LANE": geoLane, "DGQ_GEO_SIMD": geoSIMD, "DGQ_MAX_THREADS": hostMaxThreads}
	for name, v := range want {
		if got, ok := defs[name]; !ok || got != v {
			t.Errorf("runtime.h %s = %d (%v), Go has %d", name, got, ok, v)
		}
	}
	codes := map[string]error{"DGQ_ERR_GEOMETRY": ErrGeometry, "DGQ_ERR_THREADS": ErrCommand,
		"DGQ_ERR_DIVERGENT": ErrDivergentBarrier, "DGQ_ERR_MEMORY": ErrCommand}
	for name, sentinel := range codes {
		if err := launchError(int32(defs[name])); defs[name] == 0 || !errors.Is(err, sentinel) {
			t.Errorf("%s (%d) maps to %v, want %v", name, defs[name], err, sentinel)
		}
	}
}

// TestHostSIMDOrder: simd_sum combines the lanes in butterfly order by
// default and from the last lane down to lane 0 with SIMDReversed, on values
// chosen so that the two orders give different f32 sums.
func TestHostSIMDOrder(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(math.Ldexp(1+float64(i)/7, (i%5)*6-12))
	}
	x[3], x[20] = 1e8, -1e8
	butterfly := append([]float32(nil), x...)
	for o := 16; o > 0; o >>= 1 {
		next := make([]float32, 32)
		for i := range next {
			next[i] = butterfly[i] + butterfly[i^o]
		}
		butterfly = next
	}
	reversed := x[31]
	for i := 30; i >= 0; i-- {
		reversed += x[i]
	}
	if butterfly[0] == reversed {
		t.Fatalf("the two orders agree (%g): the test cannot tell them apart", reversed)
	}
	for _, c := range []struct {
		engine *HostEngine
		want   float32
	}{
		{host(t), butterfly[0]},
		{newHost(t, HostOptions{Units: testUnits, SIMDOrder: SIMDReversed}), reversed},
	} {
		out := zeros[float32](t, c.engine, 3*32)
		run(t, c.engine, "simd.kern", "simd_ops", grid(1, 1, 1), grid(32, 1, 1), buf(memOf(t, c.engine, x)), buf(out))
		for lane, v := range valuesOf[float32](out) {
			if lane%3 == 0 && v != c.want {
				t.Fatalf("%s: lane %d: simd_sum %g, want %g", c.engine.Name(), lane/3, v, c.want)
			}
		}
	}
}

// TestHostFlushSubnormals: with FlushSubnormals the kernels' arithmetic
// flushes subnormal inputs and results to zero of their sign (x/1 of a
// subnormal is ±0, the smallest normal times 0.5 is 0); without it, IEEE
// gradual underflow keeps them. Values that need no arithmetic on a
// subnormal (moved by copy_u32) are kept either way.
func TestHostFlushSubnormals(t *testing.T) {
	sub, neg, minNormal := math.Float32frombits(1), math.Float32frombits(0x807fffff), math.Float32frombits(0x00800000)
	x := []float32{sub, neg, minNormal, 1}
	for _, c := range []struct {
		opts HostOptions
		div  []float32 // x / 1
		half float32   // minNormal · 0.5
	}{
		{HostOptions{}, []float32{sub, neg, minNormal, 1}, math.Float32frombits(0x00400000)},
		{HostOptions{FlushSubnormals: true}, []float32{0, float32(math.Copysign(0, -1)), minNormal, 1}, 0},
	} {
		e := newHost(t, c.opts)
		m := memOf(t, e, x)
		run(t, e, "elementwise.kern", "temper_f32", grid(1, 1, 1), grid(32, 1, 1), buf(m), u64(uint64(len(x))), f32(1))
		got := valuesOf[float32](m)
		for i, v := range got {
			if math.Float32bits(v) != math.Float32bits(c.div[i]) {
				t.Errorf("%s: %g / 1 = %g (%#x), want %g", e.Name(), x[i], v, math.Float32bits(v), c.div[i])
			}
		}
		h := memOf(t, e, []float32{minNormal})
		run(t, e, "elementwise.kern", "scale_f32", grid(1, 1, 1), grid(32, 1, 1), buf(h), u64(1), f32(0.5))
		if v := valuesOf[float32](h)[0]; math.Float32bits(v) != math.Float32bits(c.half) {
			t.Errorf("%s: %g · 0.5 = %g, want %g", e.Name(), minNormal, v, c.half)
		}
		src := memOf(t, e, []float32{sub, neg})
		dst := zeros[float32](t, e, 2)
		run(t, e, "copy.metal", "copy_u32", grid(1, 1, 1), grid(32, 1, 1), buf(dst), buf(src), u64(2))
		if v := valuesOf[float32](dst); math.Float32bits(v[0]) != 1 || math.Float32bits(v[1]) != 0x807fffff {
			t.Errorf("%s: copy_u32 of subnormals: %#x %#x", e.Name(), math.Float32bits(v[0]), math.Float32bits(v[1]))
		}
	}
}

// TestHostOptions: options outside their constants are refused; the name
// says what differs from the defaults.
func TestHostOptions(t *testing.T) {
	for _, o := range []HostOptions{{Sanitizer: 9}, {Threads: 9}, {SIMDOrder: 9}} {
		if _, err := NewHostEngine(o); !errors.Is(err, ErrArgument) {
			t.Errorf("NewHostEngine(%+v) = %v, want ErrArgument", o, err)
		}
	}
	e := newHost(t, HostOptions{Threads: ThreadsOS, SIMDOrder: SIMDReversed, FlushSubnormals: true})
	if n := e.Name(); !strings.HasSuffix(n, ", os-threads, SIMD reversed, subnormals flushed)") {
		t.Errorf("Name = %q", n)
	}
}

// TestHostCloseReleasesStacks: an engine that ran a group of 1024 fibers
// gives their stacks back when it closes (each unit library's stack pool is
// unmapped as the library is unloaded), so the process's mappings do not
// grow with every engine a test run makes (vm.max_map_count bounds them).
func TestHostCloseReleasesStacks(t *testing.T) {
	host(t) // clang present, else skipped as every host test
	mappings := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skipf("no /proc/self/maps: %v", err)
		}
		return strings.Count(string(b), "\n")
	}
	runOnce := func() {
		e, err := NewHostEngine(HostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		x := zeros[float32](t, e, 1024)
		run(t, e, "elementwise.kern", "scale_f32", grid(1, 1, 1), grid(1024, 1, 1), buf(x), u64(1024), f32(2))
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	runOnce() // the Go runtime's and libc's own mappings settle
	before := mappings()
	for range 3 {
		runOnce()
	}
	if after := mappings(); after > before+64 {
		t.Errorf("%d mappings after three engines, %d before: a closed engine leaves its fiber stacks mapped", after, before)
	}
}
