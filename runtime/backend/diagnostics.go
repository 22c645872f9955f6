package backend

import (
	"context"
	"fmt"
)

// Diagnostics a backend may offer (dgq selftest reports them): optional
// interfaces, asserted on a Backend.

// DeviceDescriber is a backend that describes its device.
type DeviceDescriber interface {
	DeviceInfo() DeviceInfo
}

// DeviceInfo describes the hardware and driver under a backend. A field the
// backend cannot tell is empty (zero).
type DeviceInfo struct {
	// Name is the device's name ("NVIDIA H200", "Apple M2 Max").
	Name string `json:"name"`
	// Family is the architecture: "sm_90", "Apple8", a host engine's
	// emulation.
	Family string `json:"family,omitempty"`
	// Cores counts the device's compute units (streaming multiprocessors,
	// GPU cores).
	Cores int `json:"cores,omitempty"`
	// Memory is what the device's memory holds, in bytes.
	Memory uint64 `json:"memory_bytes,omitempty"`
	// Driver is the driver's (or framework's) version.
	Driver string `json:"driver,omitempty"`
	// Compiler names the kernel compiler and its version ("NVRTC 13.0",
	// "Metal (compile plan macos15, MSL 3.2)").
	Compiler string `json:"compiler,omitempty"`
	// Notes holds what else the backend reports, by name.
	Notes map[string]string `json:"notes,omitempty"`
}

// KernelReporter is a backend that compiles kernels: KernelReport compiles
// every kernel the backend may launch (not only those used so far) and
// reports each with its compiler's log and its limits. A unit that does not
// compile is reported with its error; the error returned is for a failure
// to report at all (a closed backend, ctx done).
type KernelReporter interface {
	KernelReport(ctx context.Context) (*KernelReport, error)
}

// KernelReport is what KernelReporter found.
type KernelReport struct {
	// Units are the translation units compiled, in order.
	Units []KernelUnit `json:"units"`
}

// KernelUnit is one translation unit: its compiler log (warnings; on a
// failure the whole refusal) and its kernels.
type KernelUnit struct {
	Name    string       `json:"name"`
	Log     string       `json:"log"`
	Error   string       `json:"error,omitempty"`
	Kernels []KernelInfo `json:"kernels"`
}

// KernelInfo is one compiled kernel's limits; -1 where the backend cannot
// tell.
type KernelInfo struct {
	Name string `json:"name"`
	// MaxThreads is the most threads a group (block, threadgroup) of it may
	// have on this device.
	MaxThreads int `json:"max_threads"`
	// SIMDWidth is the width of its SIMD groups (warp size,
	// threadExecutionWidth).
	SIMDWidth int `json:"simd_width"`
	// StaticSharedBytes is the group memory it declares statically.
	StaticSharedBytes int `json:"static_shared_bytes"`
	// Registers is the registers per thread (-1 where the device does not
	// say: Metal).
	Registers int `json:"registers"`
	// Error says why its pipeline could not be made ("" when it was).
	Error string `json:"error,omitempty"`
}

// Failed counts the units and kernels that failed.
func (r *KernelReport) Failed() int {
	n := 0
	for _, u := range r.Units {
		if u.Error != "" {
			n++
		}
		for _, k := range u.Kernels {
			if k.Error != "" {
				n++
			}
		}
	}
	return n
}

// Kernels counts the kernels reported.
func (r *KernelReport) Kernels() int {
	n := 0
	for _, u := range r.Units {
		n += len(u.Kernels)
	}
	return n
}

// ArithmeticProber is a backend that measures its own f32 arithmetic on
// its device (runtime/kernels' probe.kern): what the bit-exact ops of
// Backend rely on, and what the device's compiler and hardware do where
// they may choose (contraction, flushing).
type ArithmeticProber interface {
	ProbeArithmetic() (*Arithmetic, error)
}

// Arithmetic is what a probe measured over N cases of a·b and c = −(a·b
// rounded): random factors over a wide range of exponents, some with a
// subnormal product.
type Arithmetic struct {
	N int `json:"cases"`
	// RoundedProducts counts MUL_RN(a, b) equal to the product rounded to
	// nearest even (a subnormal product flushed to zero of its sign counts
	// too, and FlushedProducts counts those); a device that rounds toward
	// zero (MSL §8.2 allows it) misses about half.
	RoundedProducts int `json:"rounded_products"`
	FlushedProducts int `json:"flushed_products"`
	// UnfusedSums counts ADD_RN(MUL_RN(a, b), c) equal to 0, the two
	// roundings done one at a time (fused, it would be the product's
	// rounding error).
	UnfusedSums int `json:"unfused_sums"`
	// Contracted counts plain a·b + c that came out fused: a compiler may
	// contract within a statement, so any count is allowed; it says what
	// the compiler does.
	Contracted int `json:"contracted"`
	// FusedFMA counts FMA(a, b, c) equal to a·b + c rounded once.
	FusedFMA int `json:"fused_fma"`
}

// Exact reports whether the arithmetic is what the bit-exact ops need:
// every product rounded to nearest even (or flushed where subnormal), every
// MUL_RN/ADD_RN pair unfused, every FMA fused.
func (a *Arithmetic) Exact() bool {
	return a.RoundedProducts == a.N && a.UnfusedSums == a.N && a.FusedFMA == a.N
}

// String says it in one line.
func (a *Arithmetic) String() string {
	return fmt.Sprintf("%d cases: %d products rounded to nearest even (%d flushed), %d MUL_RN+ADD_RN unfused, %d FMA fused; %d plain a*b+c contracted",
		a.N, a.RoundedProducts, a.FlushedProducts, a.UnfusedSums, a.FusedFMA, a.Contracted)
}
