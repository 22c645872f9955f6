package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// PreludeCUDA is the CUDA prelude of the shared kernel dialect
// (docs/cuda.md).
//
//go:embed kernels/prelude_cuda.h
var PreludeCUDA string

//go:embed kernels/shared/*.kern
var sharedFS embed.FS

// SharedKernels lists the dialect-neutral kernel files (e.g. "rmsnorm.kern").
func SharedKernels() []string {
	ents, _ := fs.ReadDir(sharedFS, "kernels/shared")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// SharedSource returns the dialect source of a shared kernel file, without
// a prelude.
func SharedSource(file string) (string, error) {
	b, err := sharedFS.ReadFile("kernels/shared/" + file)
	if err != nil {
		return "", fmt.Errorf("cuda: no shared kernel %q", file)
	}
	return string(b), nil
}

// SharedCUDASource returns the CUDA translation unit of a shared kernel file:
// the CUDA prelude, then the file under a #line directive so that NVRTC's
// messages name the .kern file and its lines.
func SharedCUDASource(file string) (string, error) {
	src, err := SharedSource(file)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(PreludeCUDA)
	fmt.Fprintf(&b, "\n#line 1 %q\n", file)
	b.WriteString(src)
	return b.String(), nil
}

// CompileShared compiles a shared kernel file with the CUDA prelude (see
// Compile for the cache).
func (d *Device) CompileShared(file string, opts ...string) (*Module, error) {
	src, err := SharedCUDASource(file)
	if err != nil {
		return nil, err
	}
	return d.Compile(file, src, opts...)
}
