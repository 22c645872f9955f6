// Package codecs encodes and decodes tensors in the storage kinds of a .dgq
// pack — the diffgemma engine's format: raw (source bytes verbatim),
// q8_row (per row a bf16 scale and int8 codes), q4_block and q6_block (and
// dgq's own q5_block: per 32 weights a bf16 delta, a bf16 min and the codes),
// and nvfp4_block (per matrix an f32 scale, per row E2M1 codes and E4M3 scales
// of 16-element blocks).
//
// A tensor is seen as a row-major matrix [Rows, K] made of one or more
// matrices (an expert stack [E, N, K] is E of them); Layout gives every
// kind's byte geometry and Span the bytes of a run of rows, so encoders can
// stream a tensor in row chunks. docs/format.md §5 is the normative byte
// layout; docs/codecs.md describes the encoders and their measured error and
// speed.
//
// Two encoder methods write the same kinds: MinMax reproduces the engine's
// own encoders bit for bit (tested against the engine's own output), Search
// chooses, for the same bytes, the stored parameters with the least squared
// error, scoring every candidate after rounding it to what is stored.
//
// The package does no I/O and makes no policy decisions. Each encoder and
// decoder has a scalar reference implementation, written so that no
// multiply-add is fused (the bytes are the same on every architecture); on
// amd64 with AVX-512, generated or hand-written kernels for the affine search,
// the searching nvfp4 block encoder and the source scan reproduce the
// reference bit for bit (build tag purego disables them).
package codecs
