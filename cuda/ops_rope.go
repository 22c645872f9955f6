package cuda

import "fmt"

// RoPE queues the in-place rotation of x [rows][heads][hd] f32 (rope.kern):
// row r at position pos0 + r (pos0 + rows ≤ 2^24), invFreq the hd/2 f32
// inverse frequencies on the device.
func (o *Ops) RoPE(x, invFreq Ptr, rows, heads, hd, pos0 int) error {
	if rows <= 0 || heads <= 0 || hd <= 0 || hd%2 != 0 || hd > 1<<30 || heads > 1<<30 {
		return fmt.Errorf("cuda: RoPE of %d×%d×%d", rows, heads, hd)
	}
	if pos0 < 0 || int64(pos0)+int64(rows) > 1<<24 {
		return fmt.Errorf("cuda: RoPE at positions %d…%d", pos0, pos0+rows-1)
	}
	m, err := o.module("rope.kern")
	if err != nil {
		return err
	}
	block := uint32(min(max((hd/2+31)/32*32, 32), 256))
	groups := uint32(min(int64(rows)*int64(heads), 1<<24)) // the kernel strides over the rest
	return m.Launch("rope_f32", [3]uint32{groups, 1, 1}, [3]uint32{block, 1, 1}, 0,
		x, invFreq, uint32(rows), uint32(heads), uint32(hd), uint32(pos0))
}

// Softcap queues x[i] = cap·tanh(x[i]/cap) for n f32 values.
func (o *Ops) Softcap(x Ptr, n int64, cap float32) error {
	if n <= 0 {
		return nil
	}
	return o.stride("rope.kern", "softcap_f32", n, x, uint64(n), cap)
}

// RowStats queues, for rows of v f32 logits, the entropy (nats) of
// softmax(z/temp) into entropy[r] and the first index of the maximum, as an
// f32 value, into argmax[r].
func (o *Ops) RowStats(logits, entropy, argmax Ptr, rows, v int, temp float32) error {
	if rows <= 0 || v <= 0 || v > 1<<24 || rows > 1<<31-1 {
		return fmt.Errorf("cuda: RowStats of %d×%d", rows, v)
	}
	return o.perRow("rope.kern", "row_stats_f32", uint32(rows), v, logits, entropy, argmax, uint32(v), temp)
}
