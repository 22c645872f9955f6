// Package dev is the CUDA backend's development harness, after llm.c's
// dev/cuda: alternate kernels kept out of the production package (package
// cuda ships one kernel per op and precision), each with a test that checks
// it against the production kernel bit for bit and logs both timings, so
// that an alternate is promoted (replacing the production kernel) or deleted
// on a measurement. Nothing in dgq imports it; its tests skip without a GPU.
//
// Alternates:
//
//   - q4_gemm_v2.cu: the second generation of the q4 tensor-core GEMM of
//     moe_mma.cu (scales and biases staged once per block, coalesced code
//     copies), appended to moe_mma.cu's translation unit. Run
//     `go test ./cuda/internal/dev -run Q4V2 -v` on a GPU machine.
package dev
