package metal

import (
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// Precision selects the arithmetic of the backend's matrix products.
type Precision int

const (
	// PrecisionF32 (the default and the only one implemented) decodes every
	// weight exactly and computes every product in f32: the conformance
	// suite's tolerances hold.
	PrecisionF32 Precision = iota
	// PrecisionBF16 would be the speed mode (16-bit operands, f32
	// accumulation); NewBackend refuses it: no Metal kernel computes it yet.
	PrecisionBF16
)

// String is "f32" or "bf16".
func (p Precision) String() string {
	switch p {
	case PrecisionF32:
		return "f32"
	case PrecisionBF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// MoEKernel selects the expert GEMMs of MoE.
type MoEKernel int

const (
	// MoEExact (the default) runs router.kern's moe_expert_f32, the
	// kernel the CUDA backend runs in f32: 64-pair tiles, f32 FMA
	// accumulation along the reduction.
	MoEExact MoEKernel = iota
	// MoESimdgroup runs moe.metal's moe_expert_sg_f32: 32-pair tiles, the
	// products on SIMD-group matrices with gemm.metal's arithmetic (a fresh
	// f32 partial per step of 32, Kahan totals).
	MoESimdgroup
)

// String is "exact" or "simdgroup".
func (k MoEKernel) String() string {
	switch k {
	case MoEExact:
		return "exact"
	case MoESimdgroup:
		return "simdgroup"
	}
	return fmt.Sprintf("MoEKernel(%d)", int(k))
}

// BackendOptions configure NewBackend. The zero value is f32 precision with
// every default kernel. The kernel of each op is chosen once, when the
// backend is made, and reported in Caps().Kernels.
type BackendOptions struct {
	Precision Precision
	MoE       MoEKernel
}

// validate refuses options outside their constants, and bf16 precision: an
// error wrapping backend.ErrUnknown (a precision the backend does not offer),
// in one line.
func (o BackendOptions) validate() error {
	if o.MoE != MoEExact && o.MoE != MoESimdgroup {
		return fmt.Errorf("%w: metal MoE kernel %v (valid: MoEExact, MoESimdgroup)", ErrArgument, o.MoE)
	}
	switch o.Precision {
	case PrecisionF32:
		return nil
	case PrecisionBF16:
		return fmt.Errorf("%w: metal precision bf16 is not implemented (valid: f32)", backend.ErrUnknown)
	}
	return fmt.Errorf("%w: metal precision %v (valid: f32)", backend.ErrUnknown, o.Precision)
}

// optionsFor maps a runtime backend config to BackendOptions: precision ""
// or "f32" is PrecisionF32, "bf16" PrecisionBF16 (which validate refuses),
// anything else an error wrapping backend.ErrUnknown.
func optionsFor(c backend.Config) (BackendOptions, error) {
	switch c.Precision {
	case "", backend.F32:
		return BackendOptions{Precision: PrecisionF32}, nil
	case backend.BF16:
		return BackendOptions{Precision: PrecisionBF16}, nil
	}
	return BackendOptions{}, fmt.Errorf("%w: metal precision %q (valid: f32)", backend.ErrUnknown, c.Precision)
}

// Kernel names of Caps().Kernels, per op whose strategy a backend chooses.
const (
	kernelAttention = "tiled-f32"     // attention.kern's tiled kernels: scores, masked softmax, P·V
	kernelMatMul    = "simdgroup-f32" // gemm.metal over the weight decoded as staged
	kernelMoE       = "exact-f32"     // router.kern: norm, top-k, grouping, moe_expert_f32, combine
	kernelMoESG     = "simdgroup-f32" // router.kern's routing, grouping and combine; moe.metal's experts
	kernelSoftEmbed = "simdgroup-f32" // softmax_f32, then gemm.metal over the table
)

// kernelNames is Caps().Kernels for options o.
func (o BackendOptions) kernelNames() map[string]string {
	moe := kernelMoE
	if o.MoE == MoESimdgroup {
		moe = kernelMoESG
	}
	return map[string]string{"attention": kernelAttention, "matmul": kernelMatMul, "moe": moe, "softembed": kernelSoftEmbed}
}
