package cuda

import (
	_ "embed"
	"fmt"
	"sort"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// Kernel sources. A translation unit is the CUDA prelude, the dialect's
// common include and one file (kernels.Unit): a file of the shared dialect
// (package runtime/kernels, which Metal compiles too) or a CUDA-specific
// one below.

// preludeCUDA maps the kernel dialect to CUDA C++ for NVRTC
// (runtime/kernels/prelude_cuda.h, beside the dialect's Metal prelude).
var preludeCUDA = kernels.Prelude(kernels.CUDA)

// moeMMASource holds the tensor-core kernels of bf16 precision (q4 GEMMs,
// activation packing, bf16 narrowing): CUDA-specific, built on the common
// include.
//
//go:embed kernels/moe_mma.cu
var moeMMASource string

// cudaFiles are the CUDA-specific kernel files.
var cudaFiles = map[string]string{"moe_mma.cu": moeMMASource}

// KernelFiles lists the kernel files the package compiles: the shared
// dialect's (kernels.Files) and the CUDA-specific ones, sorted.
func KernelFiles() []string {
	names := kernels.Files()
	for n := range cudaFiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// KernelSource returns the CUDA translation unit of a kernel file: the CUDA
// prelude, the common include and the file, each under a #line directive so
// that NVRTC's messages name the file and its lines.
func KernelSource(file string) (string, error) {
	if src, ok := cudaFiles[file]; ok {
		return kernels.Unit(preludeCUDA, file, src), nil
	}
	u, err := kernels.FileUnit(preludeCUDA, file)
	if err != nil {
		return "", fmt.Errorf("cuda: %w", err)
	}
	return u, nil
}

// CompileKernel compiles a kernel file's translation unit (KernelSource;
// see Compile for the cache).
func (d *Device) CompileKernel(file string, opts ...string) (*Module, error) {
	return d.compileKernel(file, opts, true)
}

// compileKernel is CompileKernel; readCache is compile's.
func (d *Device) compileKernel(file string, opts []string, readCache bool) (*Module, error) {
	src, err := KernelSource(file)
	if err != nil {
		return nil, err
	}
	return d.compile(file, src, opts, readCache)
}
