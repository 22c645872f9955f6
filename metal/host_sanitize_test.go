//go:build linux

package metal

import (
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/metal/internal/msl/msltest"
)

// sanitizerUnits are kernels with the mistakes the sanitizers must find, and
// a correct twin.
var sanitizerUnits = map[string]string{
	"race.kern": `
KERNEL(shared_race, BUF(u32, out, 0)) {
	SHARED(u32, s, 64);
	u32 t = LOCAL_ID_X;
	s[t] = t;
	out[t] = s[(t + 1u) % LOCAL_SIZE_X]; // no barrier between the write and the neighbour's read
}

KERNEL(shared_norace, BUF(u32, out, 0)) {
	SHARED(u32, s, 64);
	u32 t = LOCAL_ID_X;
	s[t] = t;
	BARRIER();
	out[t] = s[(t + 1u) % LOCAL_SIZE_X];
}
`,
	"oob.kern": `
KERNEL(past_end, BUF(float, out, 0), SCALAR(u32, n, 1)) {
	if (LOCAL_ID_X == 0u) out[n] = 1.0f; // one past the buffer's n floats
}
`,
}

// sanitizedHost returns an engine under s, skipped where clang has no
// runtime for it (Debian: libclang-rt-19-dev).
func sanitizedHost(t *testing.T, s Sanitizer) *HostEngine {
	t.Helper()
	msltest.Require(t)
	units := maps.Clone(testUnits) // the engine tests' kernels too (kernelTests run there)
	maps.Copy(units, sanitizerUnits)
	e, err := NewHostEngine(HostOptions{Sanitizer: s, Units: units})
	if errors.Is(err, ErrHostUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// syncErr dispatches one launch and returns Sync's error.
func syncErr(t *testing.T, e Engine, unit, kernel string, groups, threads [3]int, args ...Arg) error {
	t.Helper()
	p, err := e.Pipeline(unit, kernel)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(p, groups, threads, args...); err != nil {
		t.Fatal(err)
	}
	return e.Sync()
}

// TestHostThreadSanitizer: ThreadSanitizer reports a threadgroup race (a
// shared array read by a neighbour without a barrier), and nothing for the
// same kernel with its barrier nor for RMSNorm's barriers and SIMD sums: the
// runtime's barriers order the group's threads as a GPU's do.
func TestHostThreadSanitizer(t *testing.T) {
	e := sanitizedHost(t, SanitizeThread)
	out := zeros[uint32](t, e, 64)
	if err := syncErr(t, e, "race.kern", "shared_norace", grid(2, 1, 1), grid(64, 1, 1), buf(out)); err != nil {
		t.Errorf("shared_norace: %v", err)
	}
	for i, v := range valuesOf[uint32](out) {
		if v != uint32((i+1)%64) {
			t.Fatalf("shared_norace out[%d] = %d", i, v)
		}
	}
	rng := rand.New(rand.NewPCG(17, 18))
	x := randF32(rng, 2*256, 1)
	w := randF32(rng, 256, 1)
	err := syncErr(t, e, "rmsnorm.kern", "rmsnorm_f32", grid(2, 1, 1), grid(128, 1, 1),
		buf(memOf(t, e, x)), buf(memOf(t, e, w)), buf(zeros[float32](t, e, len(x))), u32(256), f32(1e-6))
	if err != nil {
		t.Errorf("rmsnorm_f32: %v", err)
	}
	err = syncErr(t, e, "race.kern", "shared_race", grid(1, 1, 1), grid(64, 1, 1), buf(out))
	if !errors.Is(err, ErrSanitizer) || !strings.Contains(err.Error(), "data race") {
		t.Errorf("shared_race: %v, want a ThreadSanitizer data race report", err)
	}
}

// TestHostAddressSanitizer: AddressSanitizer reports a write one past a
// buffer, and nothing for the q8 re-lay and decoding (planes of one buffer,
// the pack wrapped).
func TestHostAddressSanitizer(t *testing.T) {
	e := sanitizedHost(t, SanitizeAddress)
	checkQ8Planes(t, e)
	err := syncErr(t, e, "oob.kern", "past_end", grid(1, 1, 1), grid(32, 1, 1), buf(zeros[float32](t, e, 16)), u32(16))
	if !errors.Is(err, ErrSanitizer) || !strings.Contains(err.Error(), "heap-buffer-overflow") {
		t.Errorf("past_end: %v, want an AddressSanitizer heap-buffer-overflow report", err)
	}
}

// TestHostKernelsSanitized runs kernelTests under AddressSanitizer (no
// kernel reads or writes outside its buffers or threadgroup arrays on these
// shapes) and ThreadSanitizer (no two threads of a group touch the same
// threadgroup or device word without a barrier between them, one of them
// writing).
func TestHostKernelsSanitized(t *testing.T) {
	for _, s := range []Sanitizer{SanitizeAddress, SanitizeThread} {
		t.Run(s.String(), func(t *testing.T) {
			e := sanitizedHost(t, s)
			for _, kt := range kernelTests {
				t.Run(kt.name, func(t *testing.T) { kt.run(t, e) })
			}
		})
	}
}
