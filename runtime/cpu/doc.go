// Package cpu is the reference backend (backend.Backend on host slices),
// llm.c style: each op is a plain function over []float32 written to match
// Hugging Face transformers 5.17 (MODEL_SPEC §3) to float32 precision, and
// every other backend is tested against it (runtime/conformance). It
// registers itself as backend "cpu".
//
// Numerics. Every activation is float32. Matrix products, attention dot
// products and the self-conditioning soft embedding accumulate their sums
// in float64 (each product of two float32 values is exact in float64), in a
// fixed order, and round once to float32: the result is the nearest float32
// to the exact sum in practice, so the remaining difference to transformers
// is the reference's own float32 rounding (about 1e-6 relative). Element-wise
// steps (RMSNorm, RoPE, GELU, softmax, softcap, residual adds) round to
// float32 after every operation exactly where PyTorch does, and explicit
// float32 conversions keep the Go compiler from fusing them into FMAs, so
// results do not depend on GOAMD64.
//
// Weights are decoded from their stored format (raw bf16/f16/f32, q8, q4,
// q5, q6, nvfp4) band by band as a product uses them: a few rows of a matrix
// are decoded into a small per-worker scratch and used against every token
// before the next band. The embedding gathers only the rows it needs; the
// tied lm_head streams the whole embedding in bands.
//
// Parallelism. Work is split into fixed items (bands of output rows, heads,
// tokens); each output element is computed by exactly one item in a fixed
// order, so results are bit-identical for every worker count and schedule.
package cpu
