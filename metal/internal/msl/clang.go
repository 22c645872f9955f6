package msl

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
)

// ErrNoClang is wrapped by the error when clang 19 cannot be found.
var ErrNoClang = errors.New("msl: clang-19 not found (Debian/Ubuntu: apt-get update && apt-get install -y clang-19)")

// clangCandidates are where clang 19 is looked for, in order: the PATH name
// Debian's clang-19 package installs, then its files.
var clangCandidates = []string{"clang-19", "/usr/bin/clang-19", "/usr/lib/llvm-19/bin/clang"}

// Clang is a clang 19 compiler.
type Clang struct {
	Path    string // the executable
	Version string // e.g. "19.1.7"
}

var findClang = sync.OnceValues(func() (Clang, error) {
	var tried []string
	for _, c := range clangCandidates {
		p, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c)
			continue
		}
		v, err := clangVersion(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		return Clang{Path: p, Version: v}, nil
	}
	return Clang{}, fmt.Errorf("%w; tried %v", ErrNoClang, tried)
})

// FindClang returns clang 19 (looked up once per process): clang-19 on
// PATH, else Debian's install paths. Its absence is an error wrapping
// ErrNoClang.
func FindClang() (Clang, error) { return findClang() }

var versionRE = regexp.MustCompile(`clang version (19\.[0-9.]+)`)

// clangVersion runs p --version and returns its version if it is clang 19.
func clangVersion(p string) (string, error) {
	out, err := exec.CommandContext(context.Background(), p, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("--version: %w", err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", errors.New("not clang 19")
	}
	return string(m[1]), nil
}

// stdlib is metal_stdlib.h, the CPU stand-in for Metal's standard library.
//
//go:embed metal_stdlib.h
var stdlib string

// HostDefine is the macro that puts metal_stdlib.h in host mode (empty
// address spaces, definitions calling the host runtime and libm) instead of
// check mode.
const HostDefine = "DGQ_MSL_HOST"

// HostSIMDReversed is the macro that makes the host mode's SIMD reductions
// fold one running value from the last lane down to lane 0 instead of
// combining lanes in butterfly order (the host engine's SIMDReversed).
const HostSIMDReversed = "DGQ_MSL_SIMD_REVERSED"

// HostSpecMath is the macro that makes the host mode's math functions the
// runtime's dgq_spec_* (hostrt/specmath.c): results at the bounds of MSL
// Table 8.1 (the host engine's SpecMath).
const HostSpecMath = "DGQ_MSL_SPEC_MATH"

// Stdlib returns metal_stdlib.h, the header `#include <metal_stdlib>`
// resolves to under clang (see the file's comment for its two modes).
func Stdlib() string { return stdlib }

// WriteInclude writes the header into dir as metal_stdlib, so that
// `-I dir` makes `#include <metal_stdlib>` find it.
func WriteInclude(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "metal_stdlib"), []byte(stdlib), 0o644); err != nil {
		return fmt.Errorf("msl: writing metal_stdlib: %w", err)
	}
	return nil
}
