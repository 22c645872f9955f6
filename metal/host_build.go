package metal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dgq-dev/dgq/metal/internal/msl"
)

// HostOptions configures a host engine. The zero value runs every group's
// threads as fibers, with IEEE f32 arithmetic and butterfly SIMD
// reductions. The other settings exist for tests: each changes how the host
// runs the same Metal text, within what Metal allows a GPU to do.
type HostOptions struct {
	// Sanitizer, when not SanitizeNone, builds every unit as an executable
	// under that clang sanitizer and runs each launch in a child process
	// (host_sanitize.go); reports come back as errors wrapping ErrSanitizer.
	// Sanitizer builds run one OS thread per GPU thread, whatever Threads
	// says, so that ThreadSanitizer sees the threads.
	Sanitizer Sanitizer
	// Threads selects how a group's threads run (ThreadsFibers: fibers on
	// one OS thread; ThreadsOS: one OS thread each).
	Threads Threads
	// SIMDOrder selects the order in which simd_sum (and simd_max, simd_min)
	// combine the lanes' values: Metal leaves it to the GPU.
	SIMDOrder SIMDOrder
	// FlushSubnormals runs the kernels with f32 subnormals flushed to zero
	// (inputs and results of arithmetic: x86-64's FTZ and DAZ, AArch64's
	// FZ), as Apple GPUs may do, instead of IEEE gradual underflow.
	FlushSubnormals bool
	// Units adds translation units by name (a file name: letters, digits,
	// '_', '.', '-'): kernel sources in the dialect, compiled under the
	// Metal prelude and the common include like the files of
	// runtime/kernels and metal/kernels, which a name here shadows.
	Units map[string]string

	// ucontext makes the fiber runtime switch with glibc's swapcontext where
	// it would use its own assembly (x86-64): a test covers the path other
	// architectures take.
	ucontext bool
}

// validate reports options outside their constants.
func (o HostOptions) validate() error {
	switch {
	case o.Sanitizer > SanitizeAddress:
		return fmt.Errorf("%w: host engine sanitizer %d (valid: SanitizeNone, SanitizeThread, SanitizeAddress)", ErrArgument, o.Sanitizer)
	case o.Threads > ThreadsOS:
		return fmt.Errorf("%w: host engine threads %d (valid: ThreadsFibers, ThreadsOS)", ErrArgument, o.Threads)
	case o.SIMDOrder > SIMDReversed:
		return fmt.Errorf("%w: host engine SIMD order %d (valid: SIMDButterfly, SIMDReversed)", ErrArgument, o.SIMDOrder)
	}
	return nil
}

// threads is how the engine runs a group's threads: ThreadsOS in a
// sanitizer build, else o.Threads.
func (o HostOptions) threads() Threads {
	if o.Sanitizer != SanitizeNone {
		return ThreadsOS
	}
	return o.Threads
}

// Threads selects how the host runtime runs the threads of a group.
type Threads uint8

// The ways to run a group's threads.
const (
	// ThreadsFibers runs them as fibers, each with its own stack, on one OS
	// thread per launch, switching at barriers and SIMD meetings
	// (hostrt/fibers.c): a barrier costs a few user-space context switches.
	ThreadsFibers Threads = iota
	// ThreadsOS runs each as an OS thread (hostrt/threads.c): barriers are
	// mutex-and-condition barriers, and the threads truly run concurrently.
	ThreadsOS
)

// String names the way ("fibers", "os-threads").
func (t Threads) String() string {
	switch t {
	case ThreadsFibers:
		return "fibers"
	case ThreadsOS:
		return "os-threads"
	}
	return fmt.Sprintf("Threads(%d)", uint8(t))
}

// SIMDOrder is the order in which the host's SIMD reductions combine the
// lanes of a SIMD group (metal_stdlib.h in host mode).
type SIMDOrder uint8

// The reduction orders.
const (
	// SIMDButterfly combines lane i with lane i xor 16, then 8, 4, 2, 1.
	SIMDButterfly SIMDOrder = iota
	// SIMDReversed folds one running value from the last lane down to lane
	// 0: an order as far from the butterfly as a sum of 32 terms allows.
	SIMDReversed
)

// String names the order ("butterfly", "reversed").
func (o SIMDOrder) String() string {
	switch o {
	case SIMDButterfly:
		return "butterfly"
	case SIMDReversed:
		return "reversed"
	}
	return fmt.Sprintf("SIMDOrder(%d)", uint8(o))
}

// Sanitizer selects a clang sanitizer build of the host engine.
type Sanitizer uint8

// The sanitizers.
const (
	// SanitizeNone: every unit is a shared library loaded into the process.
	SanitizeNone Sanitizer = iota
	// SanitizeThread: ThreadSanitizer (-fsanitize=thread): data races among
	// a group's threads, the threadgroup arrays included.
	SanitizeThread
	// SanitizeAddress: AddressSanitizer (-fsanitize=address): reads and
	// writes past a buffer's end (each buffer its own heap block) or a
	// threadgroup array's.
	SanitizeAddress
)

// String names the sanitizer ("none", "thread", "address").
func (s Sanitizer) String() string {
	switch s {
	case SanitizeNone:
		return "none"
	case SanitizeThread:
		return "thread"
	case SanitizeAddress:
		return "address"
	}
	return fmt.Sprintf("Sanitizer(%d)", uint8(s))
}

// flag is the sanitizer's clang option ("" for none).
func (s Sanitizer) flag() string {
	switch s {
	case SanitizeThread:
		return "-fsanitize=thread"
	case SanitizeAddress:
		return "-fsanitize=address"
	}
	return ""
}

// Host build options. A unit is compiled as C++14 at -O1 with IEEE
// arithmetic: no fast math, no contraction (-ffp-contract=off: a*b + c is
// never fused, as the kernels' MUL_RN/ADD_RN ask and Metal's Safe mode
// gives), against metal_stdlib.h in host mode and no system headers; the
// runtime (hostrt/fibers.c or hostrt/threads.c) is C11 with the system
// headers. HostOptions add to both (hostBuilder.unitFlags, runtimeFlags).
var (
	hostUnitFlags = []string{
		"-x", "c++", "-std=c++14", "-O1", "-fPIC", "-fno-fast-math", "-ffp-contract=off", "-fno-exceptions",
		"-fno-rtti", "-fvisibility=hidden", "-nostdinc", "-nostdinc++", "-D" + msl.HostDefine, "-Wno-unknown-pragmas",
	}
	hostRuntimeFlags = []string{"-x", "c", "-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-ffp-contract=off", "-Wall"}
)

// hostBuilder builds units for the host in a directory of its own: the
// header (as metal_stdlib), the runtime's object and, for a sanitizer build,
// the driver's.
type hostBuilder struct {
	clang msl.Clang
	dir   string
	opts  HostOptions
	san   Sanitizer
	objs  []string // runtime (and driver) objects linked into every unit
}

// hostRuntimeFiles are the runtime's sources, written into the build
// directory.
var hostRuntimeFiles = map[string]*string{
	"fibers.c": &hostFibersC, "threads.c": &hostThreadsC, "runtime.h": &hostRuntimeH, "fpmode.h": &hostFPModeH,
	"driver.c": &hostDriverC,
}

// newHostBuilder prepares dir (which it owns) and compiles the runtime.
func newHostBuilder(ctx context.Context, cl msl.Clang, dir string, opts HostOptions) (*hostBuilder, error) {
	b := &hostBuilder{clang: cl, dir: dir, opts: opts, san: opts.Sanitizer}
	if err := msl.WriteInclude(dir); err != nil {
		return nil, err
	}
	for name, text := range hostRuntimeFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(*text), 0o644); err != nil {
			return nil, fmt.Errorf("metal: host build: %w", err)
		}
	}
	srcs := []string{"fibers.c"}
	if opts.threads() == ThreadsOS {
		srcs[0] = "threads.c"
	}
	if b.san != SanitizeNone {
		if err := b.probeSanitizer(ctx); err != nil {
			return nil, err
		}
		srcs = append(srcs, "driver.c")
	}
	for _, src := range srcs {
		obj := filepath.Join(dir, strings.TrimSuffix(src, ".c")+".o")
		args := append(append(append([]string{}, hostRuntimeFlags...), b.runtimeFlags()...), b.sanFlags()...)
		args = append(args, "-c", filepath.Join(dir, src), "-o", obj)
		if err := b.run(ctx, src, args); err != nil {
			return nil, err
		}
		b.objs = append(b.objs, obj)
	}
	return b, nil
}

// runtimeFlags are the runtime's options for b's HostOptions.
func (b *hostBuilder) runtimeFlags() []string {
	var f []string
	if b.opts.FlushSubnormals {
		f = append(f, "-DDGQ_RT_FLUSH")
	}
	if b.opts.ucontext {
		f = append(f, "-DDGQ_RT_UCONTEXT")
	}
	return f
}

// unitFlags are the units' options for b's HostOptions: the SIMD order for
// metal_stdlib.h, and with flushed subnormals the compiler told so (it
// folds constants as the flushing threads compute).
func (b *hostBuilder) unitFlags() []string {
	var f []string
	if b.opts.SIMDOrder == SIMDReversed {
		f = append(f, "-D"+msl.HostSIMDReversed)
	}
	if b.opts.FlushSubnormals {
		f = append(f, "-fdenormal-fp-math=preserve-sign")
	}
	return f
}

// sanFlags are the options every compile and link of a sanitizer build adds.
func (b *hostBuilder) sanFlags() []string {
	if b.san == SanitizeNone {
		return nil
	}
	return []string{b.san.flag(), "-g", "-fno-omit-frame-pointer"}
}

// probeSanitizer links an empty program with the sanitizer: without its
// runtime (Debian: libclang-rt-19-dev) the engine is unavailable.
func (b *hostBuilder) probeSanitizer(ctx context.Context) error {
	src := filepath.Join(b.dir, "probe.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		return fmt.Errorf("metal: host build: %w", err)
	}
	err := b.run(ctx, "probe.c", []string{b.san.flag(), src, "-o", filepath.Join(b.dir, "probe")})
	if err != nil {
		return fmt.Errorf("%w: no %s sanitizer runtime for clang %s (Debian/Ubuntu: apt-get install -y libclang-rt-19-dev): %w",
			ErrHostUnavailable, b.san, b.clang.Version, err)
	}
	return nil
}

// unitFile is a unit's base name in the build directory.
var unitFile = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// build compiles text, a unit's Metal text and its launchers, as name and
// returns the path of the shared library (or, with a sanitizer, the
// executable).
func (b *hostBuilder) build(ctx context.Context, name, text string) (string, error) {
	if !unitFile.MatchString(name) {
		return "", fmt.Errorf("%w: %q is not a unit name the host build accepts", ErrNoSource, name)
	}
	src := filepath.Join(b.dir, name+".cpp")
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("metal: host build: %w", err)
	}
	out := filepath.Join(b.dir, name+".so")
	args := append(append(append([]string{}, hostUnitFlags...), b.unitFlags()...), b.sanFlags()...)
	args = append(args, "-I", b.dir, src, "-x", "none")
	args = append(args, b.objs...)
	if b.san == SanitizeNone {
		args = append(args, "-shared", "-Wl,-z,defs", "-Wl,-Bsymbolic")
	} else {
		out = filepath.Join(b.dir, name+".exe")
	}
	args = append(args, "-o", out, "-lm", "-lpthread")
	if err := b.run(ctx, name, args); err != nil {
		return "", err
	}
	return out, nil
}

// run runs clang with args. clang's refusal is a *CompileError (ErrCompile)
// holding its output; clang failing to run wraps ErrCompile too.
func (b *hostBuilder) run(ctx context.Context, what string, args []string) error {
	cmd := exec.CommandContext(ctx, b.clang.Path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("metal: host build of %s: %w", what, ctx.Err())
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return fmt.Errorf("%w: %s: running %s: %w", ErrCompile, what, b.clang.Path, err)
		}
		return &CompileError{Unit: what, Log: out.String()}
	}
	return nil
}
