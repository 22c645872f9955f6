// Package kernels holds the GPU kernels that are not specific to one
// vendor, written once in dgq's small kernel dialect (docs/cuda.md, "The
// shared kernel dialect"): norms, RoPE, softmax and attention, the MoE
// router, grouping and exact expert GEMM, the sampler, dequantization and
// the re-lay of stored tensors at upload.
//
// A backend compiles a translation unit per kernel file: its own prelude,
// which maps the dialect's names to its language (Prelude: prelude_cuda.h
// for NVRTC, prelude_metal.h for the Metal Shading Language), then the
// common include (common.h: group reductions, compensated sums, the number
// formats and one decoder per stored format), then the file. Unit assembles
// it; a backend-specific source (cuda's tensor-core GEMMs) uses the same
// common include through Unit, so no helper exists twice. DialectUnit is
// the unit of a file under one of the package's Dialects.
//
// Signatures parses a file's kernel declarations once, checked (parameter
// kinds, types, Metal buffer indices in order), for code that binds or
// launches kernels without reading their text: the Metal host engine's
// launchers, both Metal engines' argument checks.
//
// The package imports no backend: CUDA and Metal both consume it.
package kernels
