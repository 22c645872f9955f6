package kernels

import (
	_ "embed"
	"fmt"
)

// Dialect is a language the kernel dialect is mapped to: each has a prelude
// that defines the dialect's names (docs/cuda.md, "The shared kernel
// dialect") in that language.
type Dialect uint8

// The dialects.
const (
	// CUDA is CUDA C++ for NVRTC (prelude_cuda.h).
	CUDA Dialect = iota + 1
	// Metal is the Metal Shading Language, Metal 3 (prelude_metal.h).
	Metal
)

// String names the dialect ("cuda", "metal").
func (d Dialect) String() string {
	switch d {
	case CUDA:
		return "cuda"
	case Metal:
		return "metal"
	}
	return fmt.Sprintf("Dialect(%d)", uint8(d))
}

// preludeCUDA maps the dialect to CUDA C++ (NVRTC, no includes).
//
//go:embed prelude_cuda.h
var preludeCUDA string

// preludeMetal maps the dialect to the Metal Shading Language (Metal 3, to be
// compiled in Safe math mode: the file's comment says why).
//
//go:embed prelude_metal.h
var preludeMetal string

// Prelude returns the prelude of a dialect: the text a translation unit
// starts with (Unit, FileUnit), "" for a value that is not a Dialect above.
func Prelude(d Dialect) string {
	switch d {
	case CUDA:
		return preludeCUDA
	case Metal:
		return preludeMetal
	}
	return ""
}

// DialectUnit returns the translation unit of a kernel file in dialect d:
// FileUnit of d's prelude. An unknown dialect gives an error wrapping
// ErrUnknownDialect, an unknown file one wrapping ErrUnknownFile.
func DialectUnit(d Dialect, file string) (string, error) {
	p := Prelude(d)
	if p == "" {
		return "", fmt.Errorf("%w: %v", ErrUnknownDialect, d)
	}
	return FileUnit(p, file)
}
