// Package calibrate measures an importance matrix ("imatrix") of a bf16
// pack: it runs the model's real inputs — windows of a text, each a clean
// prefix prefilled and then canvases corrupted at dgq verify's noise rates,
// denoised without and with self-conditioning — and records, for every
// quantizable linear weight, the sum over the rows that reached it of each
// input column's square, and how many rows reached it (per expert for the
// 3-D expert banks). dgq calibrate writes it as a safetensors file
// (docs/format.md, "The imatrix file"), for a later quantization to weight
// its rounding error by.
//
// The recording is a wrapping backend (like backend.Profiled): MatMulNT
// downloads its input rows, MoE records its routes (backend.RouteRecorder)
// and downloads the normed input, and the experts' intermediate
// activations (gelu(gate·u)⊙up·u, the down projection's input, which the
// fused MoE op never exposes) are recomputed for the routed rows with the
// wrapped backend's own MatMulNT and GeluMul on each reached expert's gate
// and up rows of the bf16 bank (uploaded once per expert as two weights:
// in place on the cpu backend, a second copy of the gate_up banks on a GPU,
// which the memory estimate does not count). The wrapped backend's results
// are not touched: the model runs exactly as it would. On the cpu backend the statistics
// are deterministic (the same inputs give the same bytes); on a GPU backend
// they equal the cpu's within float tolerance (not verified by this
// package's tests, which run on the cpu).
package calibrate
