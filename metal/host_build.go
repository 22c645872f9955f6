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
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/cpu"

	"github.com/dgq-dev/dgq/metal/internal/msl"
	"github.com/dgq-dev/dgq/runtime/backend"
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
	// SpecMath makes the math functions return, for every argument, a
	// result at the bound MSL Table 8.1 allows (hostrt/specmath.c), not
	// libm's better one: what a GPU at the specification's limit computes.
	SpecMath bool
	// Contract compiles the kernels with contraction on within a statement
	// (-ffp-contract=on, with fused multiply-adds the host executes), as
	// Metal's Safe mode does (MSL §1.6.3), instead of off: only the
	// prelude's pragmas keep MUL_RN and ADD_RN unfused. On x86-64 it needs
	// a CPU with FMA (ErrHostUnavailable otherwise).
	Contract bool
	// Plan is the compile plan whose text the engine builds (its header and
	// __METAL_VERSION__); the zero value is PlanMacOS15.
	Plan CompilePlan
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

// AppleHost is the host engine's mode that computes as the MSL
// specification allows an Apple GPU to, at its limits: subnormals flushed,
// math functions at Table 8.1's bounds, contraction within statements,
// SIMD reductions in another order. A backend over it reports AppleGPU's
// numerics, as the device does.
func AppleHost() HostOptions {
	return HostOptions{FlushSubnormals: true, SpecMath: true, Contract: true, SIMDOrder: SIMDReversed}
}

// plan is the compile plan the engine builds under.
func (o HostOptions) plan() CompilePlan {
	if o.Plan.Name == "" {
		return PlanMacOS15
	}
	return o.Plan
}

// numerics is what a host engine with these options may compute: IEEE with
// glibc's functions, or MSL's bounds (SpecMath), flushing or not.
func (o HostOptions) numerics() backend.Numerics {
	n := glibcNumerics
	if o.SpecMath {
		n = AppleGPU
	}
	n.FlushSubnormals = o.FlushSubnormals
	return n
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
	case o.Plan.Name != "" && !slices.ContainsFunc(Plans(), func(p CompilePlan) bool { return p.Name == o.Plan.Name }):
		return fmt.Errorf("%w: host engine compile plan %q (valid: the plans of Plans)", ErrArgument, o.Plan.Name)
	case o.Contract && runtime.GOARCH == "amd64" && !cpu.X86.HasFMA:
		return fmt.Errorf("%w: Contract needs a CPU with fused multiply-add (FMA)", ErrHostUnavailable)
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
	"driver.c": &hostDriverC, "specmath.c": &hostSpecMathC,
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
	srcs := []string{"fibers.c", "specmath.c"}
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

// runtimeFlags are the runtime's options for b's HostOptions, and the bounds
// of hostrt/specmath.c's functions: AppleGPU's, the numerics a SpecMath
// engine reports.
func (b *hostBuilder) runtimeFlags() []string {
	u := AppleGPU.ULP
	f := []string{fmt.Sprintf("-DDGQ_SPEC_ULP_EXP=%g", u.Exp), fmt.Sprintf("-DDGQ_SPEC_ULP_LOG=%g", u.Log),
		fmt.Sprintf("-DDGQ_SPEC_ULP_TANH=%g", u.Tanh), fmt.Sprintf("-DDGQ_SPEC_ULP_SIN=%g", u.Sin),
		fmt.Sprintf("-DDGQ_SPEC_ULP_COS=%g", u.Cos)}
	if b.opts.FlushSubnormals {
		f = append(f, "-DDGQ_RT_FLUSH")
	}
	if b.opts.ucontext {
		f = append(f, "-DDGQ_RT_UCONTEXT")
	}
	return f
}

// unitFlags are the units' options for b's HostOptions: the plan's
// language version, the SIMD order and the math functions for
// metal_stdlib.h, with flushed subnormals the compiler told so (it folds
// constants as the flushing threads compute), and with Contract
// contraction within statements, fused (the last -ffp-contract wins).
func (b *hostBuilder) unitFlags() []string {
	f := []string{fmt.Sprintf("-D__METAL_VERSION__=%d", b.opts.plan().MetalVersion())}
	if b.opts.SIMDOrder == SIMDReversed {
		f = append(f, "-D"+msl.HostSIMDReversed)
	}
	if b.opts.SpecMath {
		f = append(f, "-D"+msl.HostSpecMath)
	}
	if b.opts.FlushSubnormals {
		f = append(f, "-fdenormal-fp-math=preserve-sign")
	}
	if b.opts.Contract {
		f = append(f, "-ffp-contract=on")
		if runtime.GOARCH == "amd64" {
			f = append(f, "-mfma")
		}
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
// executable) and clang's warnings.
func (b *hostBuilder) build(ctx context.Context, name, text string) (string, string, error) {
	if !unitFile.MatchString(name) {
		return "", "", fmt.Errorf("%w: %q is not a unit name the host build accepts", ErrNoSource, name)
	}
	src := filepath.Join(b.dir, name+".cpp")
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		return "", "", fmt.Errorf("metal: host build: %w", err)
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
	log, err := b.output(ctx, name, args)
	if err != nil {
		return "", "", err
	}
	return out, log, nil
}

// run runs clang with args (output).
func (b *hostBuilder) run(ctx context.Context, what string, args []string) error {
	_, err := b.output(ctx, what, args)
	return err
}

// output runs clang with args and returns what it printed (its warnings).
// clang's refusal is a *CompileError (ErrCompile) holding its output; clang
// failing to run wraps ErrCompile too.
func (b *hostBuilder) output(ctx context.Context, what string, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, b.clang.Path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("metal: host build of %s: %w", what, ctx.Err())
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return "", fmt.Errorf("%w: %s: running %s: %w", ErrCompile, what, b.clang.Path, err)
		}
		return "", &CompileError{Unit: what, Log: out.String()}
	}
	return out.String(), nil
}
