package cuda

import (
	"fmt"

	api "github.com/dgq-dev/dgq/runtime/backend"
)

// Attention as three queued steps per chunk of queries, for the real shapes
// where a per-(query, head) kernel does too little work per byte: scores
// S_h = Q_h·K_gᵀ by strided-batched cuBLAS GEMMs (one batch over the KV
// heads per member r of a head group: head h = g·group + r), the masked row
// softmax of attn_softmax.kern in place, then O_h = P_h·V_g the same way,
// written straight into the [rows][heads·hd] output. In f32 precision the
// GEMMs are f32 (CUBLAS_COMPUTE_32F); in bf16 precision cuBLAS may round
// the inputs to TF32. bf16 precision takes this path by default
// (AttentionAuto); AttentionGEMM selects it in f32 too.

// attnScoreBytes bounds one chunk's score matrix ([heads][rows][keys] f32);
// attnCausalChunk bounds a causal chunk's queries.
const (
	attnScoreBytes  = 256 << 20
	attnCausalChunk = 256
)

// attentionGEMM queues Attention (already checked) on device pointers.
//
// The queries of a chunk are first regrouped by KV head ([n][nkv][group][hd]
// → [nkv][n][group][hd], attn_permute_f32), so that each KV head's queries
// form one matrix of n·group rows (row t·group + r is head g·group + r at
// query t): one strided-batched GEMM over the KV heads computes every score,
// one the weighted values, and the output is regrouped back.
func (c *backend) attentionGEMM(out, q, k, v Ptr, a api.AttentionShape) error {
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
	if a.Causal {
		// Causal chunks see only the keys up to their last query: smaller
		// chunks skip most of the masked half of the score matrix.
		chunk = min(chunk, attnCausalChunk)
	}
	sp, err := c.scratch.ptr(scrAttn, int64(4*nq*chunk*span))
	if err != nil {
		return err
	}
	// Regrouped queries, then regrouped outputs: chunk·nq·hd f32 each.
	qp, err := c.scratch.ptr(scrAttnQ, int64(4*2*chunk*qw))
	if err != nil {
		return err
	}
	op := qp.Add(int64(4 * chunk * qw))
	m, err := c.ops.module("attn_softmax.kern")
	if err != nil {
		return err
	}
	permute := func(dst, src Ptr, outer, inner int) error {
		// dst[b][a][j] = src[a][b][j]: a < outer, b < inner, j < group·hd.
		n := int64(outer) * int64(inner) * int64(group*hd)
		return c.ops.stride("attn_softmax.kern", "attn_permute_f32", n, dst, src, uint32(outer), uint32(inner), uint32(group*hd))
	}
	// batched is one strided-batched product per KV head (column-major, α 1,
	// β 0, A not transposed unless transA).
	batched := func(transA bool, m, n, k int, x Ptr, ldx int, sx int64, y Ptr, ldy int, sy int64, z Ptr, ldz int, sz int64) error {
		return c.d.GemmStridedBatched(transA, false, m, n, k, 1, x, ldx, sx, y, ldy, sy, 0, z, ldz, sz, nkv, c.k.fast)
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
		kc, vc := k.Add(int64(4*lo*kw)), v.Add(int64(4*lo*kw))
		rows := n * group // query rows per KV head
		if err := permute(qp, q.Add(int64(4*t0*qw)), n, nkv); err != nil {
			return err
		}
		// Row-major S_g[rows][tn] is column-major (tn×rows) = K_g (tn×hd: op T
		// of the column-major hd×tn view, ld kw) · Q_gᵀ (hd×rows, ld hd).
		if err := batched(true, tn, rows, hd, kc, kw, int64(hd), qp, hd, int64(rows*hd), sp, tn, int64(rows*tn)); err != nil {
			return err
		}
		causal := uint32(0)
		if a.Causal {
			causal = 1
		}
		block := uint32(256)
		if tn >= 4096 {
			block = 1024
		}
		if err := m.Launch("attn_softmax_f32", [3]uint32{uint32(nkv * rows), 1, 1}, [3]uint32{block, 1, 1}, 0,
			sp, uint32(n), uint32(group), uint32(tn), uint32(lo), uint32(a.QueryPos+t0), causal, uint32(a.Window)); err != nil {
			return err
		}
		// Row-major O_g[rows][hd] is column-major (hd×rows, ld hd) = V_gᵀ
		// (hd×tn, ld kw) · P_gᵀ (tn×rows, ld tn).
		if err := batched(false, hd, rows, tn, vc, kw, int64(hd), sp, tn, int64(rows*tn), op, hd, int64(rows*hd)); err != nil {
			return err
		}
		if err := permute(out.Add(int64(4*t0*qw)), op, nkv, n); err != nil {
			return err
		}
	}
	return nil
}
