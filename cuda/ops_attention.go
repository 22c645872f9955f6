package cuda

import (
	"fmt"
	"math"

	api "github.com/dgq-dev/dgq/runtime/backend"
)

// attnTile is the tile edge of attention.kern's tiled kernels (AT_BM = AT_BN)
// and attnThreads their group size (AT_THREADS).
const (
	attnTile    = 64
	attnThreads = 256
)

// attnSpan is the number of key rows Attention's scratch holds per query
// row and head: KeyStart … KeyEnd−1 (bidirectional) or KeyStart …
// QueryPos+Rows−1 (causal).
func attnSpan(a api.AttentionShape) int {
	end := a.KeyEnd
	if a.Causal {
		end = a.QueryPos + a.Rows
	}
	return end - a.KeyStart
}

// AttentionScratch is the size in bytes of the scores scratch Attention
// needs for shape a: Heads·Rows·span f32 values.
func AttentionScratch(a api.AttentionShape) int64 {
	return 4 * int64(a.Heads) * int64(a.Rows) * int64(attnSpan(a))
}

// Attention queues out = softmax(q·kᵀ)·v per head (scale 1, grouped KV heads,
// the visible keys of api.AttentionShape) in f32: attention.kern's
// attn_tiles_f32 (the scores), attn_probs_f32 and attn_tiles_f32 again
// (P·V), with the scores and
// probabilities in scores (AttentionScratch(a) bytes). The shape must have
// passed api.CheckAttention.
func (o *Ops) Attention(out, q, k, v, scores Ptr, a api.AttentionShape) error {
	span := attnSpan(a)
	const lim = math.MaxInt32
	if a.Rows <= 0 || a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 || span <= 0 ||
		a.Rows > lim/attnTile || a.Heads > lim || a.HeadDim > lim || span > lim-attnTile ||
		int64(a.Heads)*int64((a.Rows+attnTile-1)/attnTile) > lim ||
		a.KeyStart < 0 || a.KeyStart > lim || a.QueryPos < 0 || a.QueryPos > lim || a.Window < 0 || a.Window > lim {
		return fmt.Errorf("cuda: Attention of %+v", a)
	}
	m, err := o.module("attention.kern")
	if err != nil {
		return err
	}
	causal := uint32(0)
	if a.Causal {
		causal = 1
	}
	shape := []any{uint32(a.Rows), uint32(a.Heads), uint32(a.Heads / a.KVHeads), uint32(a.HeadDim), uint32(span),
		int32(a.KeyStart), causal, int32(a.QueryPos), int32(a.Window)}
	rowTiles := int64(a.Heads) * int64((a.Rows+attnTile-1)/attnTile)
	gy := uint32(min(rowTiles, 65535)) // the kernels stride over the rest
	block := [3]uint32{attnThreads, 1, 1}

	colTiles := uint32((span + attnTile - 1) / attnTile)
	if err := m.Launch("attn_tiles_f32", [3]uint32{colTiles, gy, 1}, block, 0, append([]any{q, k, scores, uint32(0)}, shape...)...); err != nil {
		return err
	}
	smBlock := uint32(256)
	if span <= 512 {
		smBlock = 128
	}
	rows := uint32(min(int64(a.Rows)*int64(a.Heads), 1<<20))
	if err := m.Launch("attn_probs_f32", [3]uint32{rows, 1, 1}, [3]uint32{smBlock, 1, 1}, 0,
		scores, uint32(a.Rows), uint32(a.Heads), uint32(span), int32(a.KeyStart), causal, int32(a.QueryPos), int32(a.Window)); err != nil {
		return err
	}
	dimTiles := uint32((a.HeadDim + attnTile - 1) / attnTile)
	return m.Launch("attn_tiles_f32", [3]uint32{dimTiles, gy, 1}, block, 0, append([]any{scores, v, out, uint32(1)}, shape...)...)
}
