// Package conformance is the conformance suite of backend.Backend: it runs
// every op of a backend on random inputs, at the real model's widths (2816,
// 704, 2112, head dims 256 and 512, vocabulary 262144) and small odd ones,
// and compares the results with the CPU reference backend under the
// tolerances documented on backend.Backend:
//
//   - Upload/Download round trips, Dequant, Copy, AddScale, Embed, Temper
//     and RoundBF16: bit-exact (NaNs may differ in payload; flushed
//     subnormals accepted where the backend's Numerics say it may flush).
//   - MatMulNT: |c − ref| ≤ MatMulRel·Σ_k |a[k]·w[k]|, for weights in every
//     format (raw bf16, f16 and f32, q8, q4, q5, q6, nvfp4) encoded from
//     random values with codecs.EncodeTensor.
//   - RMSNorm, RoPE, Softcap, RowStats, GeluMul, SoftEmbed, Attention, MoE
//     and Categorical: an arithmetic budget (the constant of each) plus a
//     term derived from the documented bounds of the math functions both
//     sides call (Tolerances, from each backend's Caps().Numerics).
//
// Failure messages name the op, the case, the index, the value and its
// reference, and the bound; a case reports its first few mismatches and
// then their count. Every GPU backend must pass Run; the CPU backend passes
// it trivially. RunOpts runs a reduced suite (Options.Small: every op and
// format, the small odd shapes) for backends too slow for the model's
// widths (the Metal backend on its host engine, which runs every GPU thread
// on the CPU).
//
// The suite runs on a T: a *testing.T through runtime/backendtest, or a
// Recorder, which runs it in a program (dgq selftest) and keeps every
// result. The package does not import testing.
package conformance
