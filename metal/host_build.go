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

// HostOptions configures a host engine.
type HostOptions struct {
	// Sanitizer, when not SanitizeNone, builds every unit as an executable
	// under that clang sanitizer and runs each launch in a child process
	// (host_sanitize.go); reports come back as errors wrapping ErrSanitizer.
	Sanitizer Sanitizer
	// Units adds translation units by name (a file name: letters, digits,
	// '_', '.', '-'): kernel sources in the dialect, compiled under the
	// Metal prelude and the common include like the files of
	// runtime/kernels, which a name here shadows.
	Units map[string]string
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
// runtime (hostrt/runtime.c) is C11 with the system headers.
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
	san   Sanitizer
	objs  []string // runtime (and driver) objects linked into every unit
}

// newHostBuilder prepares dir (which it owns) and compiles the runtime.
func newHostBuilder(ctx context.Context, cl msl.Clang, dir string, san Sanitizer) (*hostBuilder, error) {
	b := &hostBuilder{clang: cl, dir: dir, san: san}
	if err := msl.WriteInclude(dir); err != nil {
		return nil, err
	}
	files := map[string]string{"runtime.c": hostRuntimeC, "runtime.h": hostRuntimeH, "driver.c": hostDriverC}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("metal: host build: %w", err)
		}
	}
	srcs := []string{"runtime.c"}
	if san != SanitizeNone {
		if err := b.probeSanitizer(ctx); err != nil {
			return nil, err
		}
		srcs = append(srcs, "driver.c")
	}
	for _, src := range srcs {
		obj := filepath.Join(dir, strings.TrimSuffix(src, ".c")+".o")
		args := append(append([]string{}, hostRuntimeFlags...), b.sanFlags()...)
		args = append(args, "-c", filepath.Join(dir, src), "-o", obj)
		if err := b.run(ctx, src, args); err != nil {
			return nil, err
		}
		b.objs = append(b.objs, obj)
	}
	return b, nil
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
		return "", fmt.Errorf("%w: %q is not a unit name the host build accepts", ErrUnknownUnit, name)
	}
	src := filepath.Join(b.dir, name+".cpp")
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("metal: host build: %w", err)
	}
	out := filepath.Join(b.dir, name+".so")
	args := append(append([]string{}, hostUnitFlags...), b.sanFlags()...)
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

// run runs clang with args; a failure wraps ErrHostBuild with the first
// lines of clang's output.
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
			return fmt.Errorf("%w: %s: running %s: %w", ErrHostBuild, what, b.clang.Path, err)
		}
		return fmt.Errorf("%w: %s: %s", ErrHostBuild, what, headLines(out.String(), 8))
	}
	return nil
}

// headLines returns the first n nonempty lines of s, joined by "\n\t".
func headLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n\t")
}
