package cuda

import "github.com/dgq-dev/dgq/codecs"

// matMulFast is MatMulNT's PrecisionBF16 path for out[m][N] = a[m][K]·wᵀ
// (out and a f32 on the device, w resident): it reports handled = false,
// queueing nothing, where it does not apply (exact mode, other formats,
// empty shapes), and the caller runs the exact path.
//
//   - raw bf16 w: a rounded to bf16 (narrow_bf16, to nearest even) into
//     scratch, then cuBLAS GemmEx with bf16 inputs, f32 output and f32
//     compute.
//   - q4 w (K a multiple of 32, sm_80 or later): a packed to fp16 with a power-of-two scaling
//     per row (moe_pack_f16) and q4_dense, the tensor-core q4 GEMM of the MoE
//     (weights decoded to fp16 in registers, f32 accumulation; moe_mma.cu).
//
// Shapes are the caller's to check (backend.CheckMatMulNT).
func (c *backend) matMulFast(out, a Ptr, w *cudaWeight, m int) (handled bool, err error) {
	if !c.k.fast || w.f32 || m <= 0 {
		return false, nil
	}
	n, k := w.Rows(), w.Cols()
	if n <= 0 || k <= 0 {
		return false, nil
	}
	m64, k64 := int64(m), int64(k)
	switch {
	case w.f == codecs.Raw && w.dt == codecs.BF16:
		ab, err := c.narrowBF16(scrMatMulA16, a, m64*k64)
		if err != nil {
			return true, err
		}
		// Row-major out[m][n] = a·wᵀ is column-major outᵀ (n×m) = w·aᵀ: w
		// [n][k] row-major is the column-major k×n wᵀ (op T), a [m][k] the
		// column-major k×m aᵀ (op N).
		return true, c.d.GemmEx(true, false, n, m, k, 1, w.b.Ptr(), R16BF, k, ab, R16BF, k, 0, out, R32F, n)
	case c.q4Fast(w):
		cfg, ok := c.q4Pick(float64(m), m64)
		if !ok {
			return false, nil
		}
		ab, err := c.scratch.ptr(scrMatMulQ4A, 2*m64*k64)
		if err != nil {
			return true, err
		}
		ainv, err := c.scratch.ptr(scrMatMulQ4S, 4*m64)
		if err != nil {
			return true, err
		}
		if err := c.moePack(a, m64, k, ab, ainv); err != nil {
			return true, err
		}
		// The grouped kernels' pairs, tiles and wts are not read by q4_dense.
		grid := [3]uint32{uint32((n + 127) / 128), uint32((m + cfg.bm() - 1) / cfg.bm()), 1}
		return true, c.q4Launch(cfg, q4Dense, w, ab, ainv, ab, ab, ab, out, k, n, m, 1, grid)
	}
	return false, nil
}
