// Package codecs encodes and decodes tensors in the storage formats of a
// .dgq pack: raw (source bytes verbatim), q8 (per-row symmetric int8), q4,
// q5 and q6 (group-32 affine with fp16 scale and bias), and nvfp4 (E2M1
// values in 16-element blocks with an FP8 E4M3 block scale and an FP32
// per-tensor scale, ModelOpt convention).
//
// A tensor is seen as a row-major matrix [Rows, K] (see Matrix); every format
// stores it planar, as a sequence of 64-byte-aligned planes (see Planes), so
// GPU kernels can load code vectors and scales with aligned vector loads.
// docs/format.md fixes the plane geometry; docs/codecs.md is the normative
// description of the bytes inside the planes, the decoders and the encoders'
// error-minimizing search.
//
// The package does no I/O and makes no policy decisions. Each encoder and
// decoder has a scalar reference implementation; faster paths, where present,
// are tested to be bit-identical to it: on amd64 with AVX-512 the q4/q5/q6,
// q8 and nvfp4 encoders run generated assembly kernels (go generate; build tag
// purego disables them) that reproduce the reference encoders bit for bit,
// their statistics included.
package codecs
