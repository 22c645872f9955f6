package cuda

import (
	"fmt"
	"os"

	"github.com/dgq-dev/dgq/runtime"
)

// Attention as three queued steps per chunk of queries, for the real shapes
// where a per-(query, head) kernel does too little work per byte: scores
// S_h = Q_h·K_gᵀ by strided-batched cuBLAS GEMMs (one batch over the KV
// heads per member r of a head group: head h = g·group + r), the masked row
// softmax of attn_softmax.kern in place, then O_h = P_h·V_g the same way,
// written straight into the [rows][heads·hd] output. In f32 precision the
// GEMMs are f32 (CUBLAS_COMPUTE_32F); in bf16 precision cuBLAS may round
// the inputs to TF32.

// attnScoreBytes bounds one chunk's score matrix ([heads][rows][keys] f32).
const attnScoreBytes = 256 << 20

// attnPath says whether Attention takes the GEMM path: in bf16 precision,
// or when DGQ_CUDA_ATTN=blas (DGQ_CUDA_ATTN=kernel forces the tiled kernels
// of attention.kern), for measurements.
func (c *backend) attnBLAS() bool {
	switch os.Getenv("DGQ_CUDA_ATTN") {
	case "blas":
		return true
	case "kernel":
		return false
	}
	return c.fast
}

// attentionBLAS queues Attention (already checked) on device pointers.
func (c *backend) attentionBLAS(out, q, k, v Ptr, a runtime.AttentionShape) error {
	nq, nkv, hd := a.Heads, a.KVHeads, a.HeadDim
	group := nq / nkv
	qw, kw := nq*hd, nkv*hd
	// Keys a chunk may see: at most span.
	span := a.KeyEnd - a.KeyStart
	if a.Causal {
		span = a.QueryPos + a.Rows - a.KeyStart
		if a.Window > 0 {
			span = min(span, a.Window+a.Rows)
		}
	}
	chunk := max(1, min(a.Rows, attnScoreBytes/(4*nq*max(span, 1))))
	scratch, err := c.grow(&c.sc.attn, int64(4*nq*chunk*span))
	if err != nil {
		return err
	}
	sp := scratch.Ptr()
	m, err := c.ops.module("attn_softmax.kern")
	if err != nil {
		return err
	}
	for t0 := 0; t0 < a.Rows; t0 += chunk {
		n := min(chunk, a.Rows-t0)
		lo, hi := a.KeyStart, a.KeyEnd
		if a.Causal {
			p := a.QueryPos + t0
			hi = p + n
			if a.Window > 0 {
				lo = max(lo, p-a.Window+1)
			}
		}
		tn := hi - lo
		if tn <= 0 || tn > span {
			return fmt.Errorf("cuda: attention chunk of %d keys (span %d)", tn, span)
		}
		qc := q.Add(int64(4 * t0 * qw))
		kc, vc := k.Add(int64(4*lo*kw)), v.Add(int64(4*lo*kw))
		for r := range group {
			// Row-major S_h[n][tn] is column-major (tn×n) = K_g (tn×hd, op T of
			// the col-major hd×tn view, ld kw) · Q_hᵀ (hd×n, ld qw).
			if err := c.d.GemmStridedBatched(true, false, tn, n, hd, 1,
				kc, kw, int64(hd),
				qc.Add(int64(4*r*hd)), qw, int64(group*hd),
				0, sp.Add(int64(4*r*n*tn)), tn, int64(group*n*tn), nkv, c.fast); err != nil {
				return err
			}
		}
		causal := uint32(0)
		if a.Causal {
			causal = 1
		}
		block := uint32(256)
		if tn >= 4096 {
			block = 1024
		}
		if err := m.Launch("attn_softmax_f32", [3]uint32{uint32(nq * n), 1, 1}, [3]uint32{block, 1, 1}, 0,
			sp, uint32(n), uint32(tn), uint32(lo), uint32(a.QueryPos+t0), causal, uint32(a.Window)); err != nil {
			return err
		}
		oc := out.Add(int64(4 * t0 * qw))
		for r := range group {
			// Row-major O_h[n][hd] (ld qw) is column-major (hd×n) = V_gᵀ (hd×tn,
			// ld kw) · P_hᵀ (tn×n, ld tn).
			if err := c.d.GemmStridedBatched(false, false, hd, n, tn, 1,
				vc, kw, int64(hd),
				sp.Add(int64(4*r*n*tn)), tn, int64(group*n*tn),
				0, oc.Add(int64(4*r*hd)), qw, int64(group*hd), nkv, c.fast); err != nil {
				return err
			}
		}
	}
	return nil
}
