package dgq

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/dgq-dev/dgq/codecs"
)

// region is a byte range [start, end) of a blob that a tensor occupies.
type region struct{ start, end int64 }

// checkPadding reports every run of non-zero bytes of blob outside the
// regions (the padding between and around tensors must be zero).
func checkPadding(blob []byte, regions []region, what string) []Finding {
	sort.Slice(regions, func(a, b int) bool { return regions[a].start < regions[b].start })
	var out []Finding
	var pos int64
	gap := func(from, to int64) {
		to = min(to, int64(len(blob)))
		for i := from; i < to; i++ {
			if blob[i] != 0 {
				out = append(out, Finding{Kind: KindPadding, Message: fmt.Sprintf("%s byte %d (between tensors, [%d, %d)) is 0x%02x, not zero", what, i, from, to, blob[i])})
				return
			}
		}
	}
	for _, r := range regions {
		if r.start > pos {
			gap(pos, r.start)
		}
		pos = max(pos, r.end)
	}
	gap(pos, int64(len(blob)))
	return out
}

// clipped is the part of [off, off+n) inside a blob of size bytes (bounds
// problems are Validate's findings, not padding ones).
func clipped(off, n, size int64) (region, bool) {
	if off < 0 || n < 0 || off > size {
		return region{}, false
	}
	return region{off, off + min(n, size-off)}, true
}

// PaddingFindings reports non-zero bytes between the tensors of a canonical
// view (what a loader checks besides the digests).
func PaddingFindings(m *Manifest, view []byte) []Finding {
	return checkPadding(view, canonicalRegions(m, int64(len(view))), "blob")
}

// canonicalRegions are the ranges of the blob the tensors occupy.
func canonicalRegions(m *Manifest, size int64) []region {
	var rs []region
	for _, t := range m.Tensors {
		if r, ok := clipped(t.Offset, t.Size, size); ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// localRegions are the ranges of a layered pack's local blob its tensors
// occupy (entries without a source keep their canonical offset there).
func localRegions(m *Manifest, size int64) []region {
	var rs []region
	for _, t := range m.Tensors {
		off := t.Offset
		if s := t.Source; s != nil {
			if s.Kind != SourceLocal {
				continue
			}
			off = s.Offset
		}
		if r, ok := clipped(off, t.Size, size); ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// deepBandElements bounds the values one worker decodes at a time.
const deepBandElements = 1 << 20

// AuditDecode decodes every tensor of the canonical view whose entry is
// sound and reports each one that holds a NaN or an infinity (what audit
// --deep adds: a check of the content even without digests).
func AuditDecode(ctx context.Context, m *Manifest, blob []byte, workers int) ([]Finding, error) {
	var idx []int
	for i, t := range m.Tensors {
		gm, ferr := codecs.FlattenShape(t.Shape)
		size, serr := t.Format.EncodedSize(t.DType, gm)
		if ferr == nil && serr == nil && size == t.Size && t.Offset >= 0 && t.Offset <= int64(len(blob))-t.Size {
			idx = append(idx, i) // others are reported by Validate
		}
	}
	return eachTensor(ctx, m, idx, workers, func(t Tensor) []Finding {
		if f, bad := decodeFinite(t, blob[t.Offset:t.Offset+t.Size]); bad {
			return []Finding{f}
		}
		return nil
	})
}

// decodeFinite decodes one tensor in bands and reports its first
// non-finite value.
func decodeFinite(t Tensor, enc []byte) (Finding, bool) {
	gm, _ := codecs.FlattenShape(t.Shape)
	if gm.K == 0 {
		return Finding{}, false
	}
	band := max(1, deepBandElements/gm.K)
	buf := make([]float32, min(band, gm.Rows)*gm.K)
	for r0 := int64(0); r0 < gm.Rows; r0 += band {
		n := min(band, gm.Rows-r0)
		dst := buf[:n*gm.K]
		var derr error
		if err := guardFault("tensor "+t.Name, func() error { derr = codecs.DecodeRows(t.Format, t.DType, gm, enc, r0, n, dst); return nil }); err != nil {
			return Finding{Tensor: t.Name, Kind: KindBlob, Message: err.Error()}, true
		}
		if derr != nil {
			return Finding{Tensor: t.Name, Kind: KindBlob, Message: derr.Error()}, true
		}
		for i, v := range dst {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				row, col := r0+int64(i)/gm.K, int64(i)%gm.K
				return Finding{Tensor: t.Name, Kind: KindNonFinite, Message: fmt.Sprintf("decodes to %v at row %d, column %d", v, row, col)}, true
			}
		}
	}
	return Finding{}, false
}
