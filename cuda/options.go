package cuda

import (
	"fmt"
	"strings"
)

// Precision selects the arithmetic of a backend's matrix products.
type Precision int

const (
	// PrecisionF32 (the default) computes every product in f32 from
	// exactly decoded weights: the conformance suite's tolerances hold, and
	// a pack's outputs stay within f32 rounding of the CPU runtime.
	PrecisionF32 Precision = iota
	// PrecisionBF16 runs the large products on the tensor cores: raw bf16
	// weights and the soft embedding with activations rounded to bf16, q4
	// weights decoded to fp16 with fp16 activations (moe_mma.cu), f32
	// accumulation, attention scores in TF32. The fast mode, with
	// bf16-level error.
	PrecisionBF16
)

// String is "f32" or "bf16".
func (p Precision) String() string {
	if p == PrecisionBF16 {
		return "bf16"
	}
	return "f32"
}

// AttentionKernel selects the kernels of Attention.
type AttentionKernel int

const (
	// AttentionAuto is AttentionTiled in f32 precision and AttentionGEMM
	// in bf16.
	AttentionAuto AttentionKernel = iota
	// AttentionTiled runs attention.kern's tiled f32 kernels (scores,
	// masked softmax, P·V).
	AttentionTiled
	// AttentionGEMM runs the scores and P·V as strided-batched cuBLAS GEMMs
	// around attn_softmax.kern: f32 arithmetic in f32 precision, TF32
	// inputs in bf16 (attention_gemm.go).
	AttentionGEMM
)

// Q4Tile fixes the pairs per block of the q4 tensor-core GEMM (bf16
// precision; moe_mma.cu's configurations s, m and l).
type Q4Tile int

const (
	// Q4TileAuto picks by the rows each weight slice sees: 32 up to 24
	// rows (pairs per expert, or the rows of a dense product), 64 up to
	// 48, else 128, falling back to one that fits the device.
	Q4TileAuto Q4Tile = iota
	// Q4Tile32, Q4Tile64 and Q4Tile128 fix the configuration (tests and
	// measurements compare them); one that does not fit the device or the
	// shape leaves the product to the exact kernels.
	Q4Tile32
	Q4Tile64
	Q4Tile128
)

// Options configure NewBackend. The zero value is f32 precision with every
// kernel chosen for it. The choice of kernel per op is made once, when the
// backend is made, and reported in Caps().Kernels.
type Options struct {
	Precision Precision
	Attention AttentionKernel
	Q4Tile    Q4Tile
}

// validate reports options outside their constants.
func (o Options) validate() error {
	switch {
	case o.Precision != PrecisionF32 && o.Precision != PrecisionBF16:
		return fmt.Errorf("cuda: precision %d (valid: PrecisionF32, PrecisionBF16)", o.Precision)
	case o.Attention < AttentionAuto || o.Attention > AttentionGEMM:
		return fmt.Errorf("cuda: attention kernel %d (valid: AttentionAuto, AttentionTiled, AttentionGEMM)", o.Attention)
	case o.Q4Tile < Q4TileAuto || o.Q4Tile > Q4Tile128:
		return fmt.Errorf("cuda: q4 tile %d (valid: Q4TileAuto, Q4Tile32, Q4Tile64, Q4Tile128)", o.Q4Tile)
	}
	return nil
}

// kernelPlan is the backend's choice of kernel per op, fixed when it is
// made from its Options and the device.
type kernelPlan struct {
	fast     bool   // PrecisionBF16: the tensor-core paths where a weight has one
	attnGEMM bool   // Attention through cuBLAS (attention_gemm.go), else attention.kern
	q4MMA    bool   // q4 weights whose width is a multiple of 32 run moe_mma.cu's GEMM (bf16, sm_80+)
	q4Tile   Q4Tile // that GEMM's configuration (Q4TileAuto: by shape)
	maxSmem  uint32 // the dynamic shared memory a block may ask for on the device
}

// planKernels chooses the kernels of a backend with options o on a device
// of compute capability major.minor.
func planKernels(o Options, major, minor int) kernelPlan {
	p := kernelPlan{fast: o.Precision == PrecisionBF16, q4Tile: o.Q4Tile, maxSmem: maxDynSmem(major, minor)}
	p.attnGEMM = o.Attention == AttentionGEMM || (o.Attention == AttentionAuto && p.fast)
	p.q4MMA = p.fast && major >= 8 // mma.sync f16, cp.async
	return p
}

// maxDynSmem is the most dynamic shared memory a block may ask for: 227 KiB
// on sm_90, 163 KiB on sm_80 and sm_87, 99 KiB on the other sm_8x and
// later (the q4 GEMM needs sm_80, so older devices do not matter).
func maxDynSmem(major, minor int) uint32 {
	switch {
	case major == 9:
		return 227 << 10
	case major == 8 && (minor == 0 || minor == 7):
		return 163 << 10
	}
	return 99 << 10
}

// names is the plan as Caps.Kernels reports it: per op, the strategy, and
// for ops that depend on the weight's format, the strategy per format
// ("q4:…", "bf16:…" for raw bf16, "other:…").
func (p kernelPlan) names() map[string]string {
	attn := "tiled-f32"
	if p.attnGEMM {
		attn = "gemm-f32"
		if p.fast {
			attn = "gemm-tf32"
		}
	}
	exact := "dequant-sgemm-f32"
	matmul, soft, moe := exact, exact, "exact-f32"
	if p.fast {
		var mm, me []string
		mm = append(mm, "bf16:gemmex-bf16")
		if p.q4MMA {
			tile := "q4:mma-f16"
			if p.q4Tile != Q4TileAuto {
				tile += fmt.Sprintf("-tile%d", q4Configs[p.q4Tile-Q4Tile32].bm())
			}
			mm = append(mm, tile)
			me = append(me, tile)
		}
		matmul = strings.Join(append(mm, "other:"+exact), " ")
		if len(me) > 0 {
			moe = strings.Join(append(me, "other:exact-f32"), " ")
		}
		soft = "bf16:gemmex-bf16 other:" + exact
	}
	return map[string]string{"attention": attn, "matmul": matmul, "moe": moe, "softembed": soft}
}
