package metal

import (
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// Attention with attention.kern's tiled f32 kernels, as the CUDA backend's
// AttentionTiled runs them: the scores S = q·kᵀ per head in 64×64 tiles,
// each row of S replaced by the softmax over the keys its query sees, then
// out = P·v in 64×64 tiles, S in scratch ([Heads][Rows][span] f32).

// attnTile is the tiled kernels' tile edge (AT_BM = AT_BN) and attnThreads
// their group size (AT_THREADS): the kernels need exactly that many.
const (
	attnTile    = 64
	attnThreads = 256
)

// attnSpan is the number of key rows the scores hold per query row and
// head: KeyStart … KeyEnd−1 (bidirectional) or KeyStart … QueryPos+Rows−1
// (causal).
func attnSpan(a backend.AttentionShape) int {
	end := a.KeyEnd
	if a.Causal {
		end = a.QueryPos + a.Rows
	}
	return end - a.KeyStart
}

func (b *metalBackend) Attention(out, q, k, v backend.Buf, a backend.AttentionShape) error {
	p, err := b.operands(backend.CheckAttention(out, q, k, v, a), out, q, k, v)
	if err != nil {
		return err
	}
	span := attnSpan(a)
	const lim = math.MaxInt32
	if a.Rows > lim/attnTile || a.Heads > lim || a.HeadDim > lim || span > lim-attnTile ||
		int64(a.Heads)*int64((a.Rows+attnTile-1)/attnTile) > lim || a.KeyStart > lim || a.QueryPos > lim || a.Window > lim {
		return fmt.Errorf("%w: metal: Attention of %+v", ErrArgument, a)
	}
	scores, err := b.scratchMem(scrAttn, 4*int64(a.Heads)*int64(a.Rows)*int64(span))
	if err != nil {
		return err
	}
	causal := uint32(0)
	if a.Causal {
		causal = 1
	}
	shape := []Arg{u32Arg(uint32(a.Rows)), u32Arg(uint32(a.Heads)), u32Arg(uint32(a.Heads / a.KVHeads)), u32Arg(uint32(a.HeadDim)),
		u32Arg(uint32(span)), i32Arg(int32(a.KeyStart)), u32Arg(causal), i32Arg(int32(a.QueryPos)), i32Arg(int32(a.Window))}
	rowTiles := int64(a.Heads) * int64((a.Rows+attnTile-1)/attnTile)
	gy := int(min(rowTiles, 65535)) // the kernels stride over the rest
	s := memArg(scores, 0)
	colTiles := (span + attnTile - 1) / attnTile
	if err := b.launch("attention.kern", "attn_tiles_f32", [3]int{colTiles, gy}, [3]int{attnThreads},
		append([]Arg{bufArg(p[1], 0), bufArg(p[2], 0), s, u32Arg(0)}, shape...)...); err != nil {
		return err
	}
	probThreads := fitThreads(span, 128)
	if span > 512 {
		probThreads = 256
	}
	rows := int(min(int64(a.Rows)*int64(a.Heads), 1<<20))
	if err := b.launch("attention.kern", "attn_probs_f32", [3]int{rows}, [3]int{probThreads},
		s, u32Arg(uint32(a.Rows)), u32Arg(uint32(a.Heads)), u32Arg(uint32(span)), i32Arg(int32(a.KeyStart)), u32Arg(causal),
		i32Arg(int32(a.QueryPos)), i32Arg(int32(a.Window))); err != nil {
		return err
	}
	dimTiles := (a.HeadDim + attnTile - 1) / attnTile
	return b.launch("attention.kern", "attn_tiles_f32", [3]int{dimTiles, gy}, [3]int{attnThreads},
		append([]Arg{s, bufArg(p[3], 0), bufArg(p[0], 0), u32Arg(1)}, shape...)...)
}
