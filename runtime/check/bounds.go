package check

import "math"

// DefaultBounds returns the parity bounds of a reference that carries no
// float64 results (a reference with them derives every float tensor's bound
// from transformers' own float32 error: F64Multiple, F64Floor). They hold a
// pack to the weights the reference was made from (Parity refuses the
// verdict otherwise): the float32 reference carries rounding noise of up to
// ~4e-3 in the logits of the random-weight fixtures (transformers in
// float64 differs from it by that much), and the CPU backend measures at
// most 5.7e-3 (logits) and 7.2e-4 (hidden states) on them; the bounds are
// 2e-2 on logits and entropies and 5e-3 on hidden states, with identical
// argmax and integer references. VsCPU, the bound on another backend's
// difference from the CPU backend, is VsCPUF32.
func DefaultBounds() Bounds {
	return Bounds{Logits: 2e-2, Hidden: 5e-3, VsCPU: VsCPUF32}
}

// Bounds on a backend's difference from the CPU runtime (Bounds.VsCPU).
// VsCPUF32 is for f32 arithmetic: the CPU sums in float64, and any f32
// implementation lands ~1e-3 away on the fixtures, whose random weights
// amplify rounding (transformers in float32 is 4.8e-4–2.6e-3 from
// transformers in float64 on them; the H200 measured up to 4.9e-3,
// docs/cuda.md). bf16 tensor-core activations (backend precision "bf16")
// carry ~2⁻⁹ relative error per product, which these fixtures amplify into
// logits errors of order 10: VsCPUBF16 reports the difference without
// bounding it (docs/cuda.md measures that precision at the real shapes).
var (
	VsCPUF32  = 1e-2
	VsCPUBF16 = math.Inf(1)
)
