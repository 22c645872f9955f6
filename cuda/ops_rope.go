package cuda

import "fmt"

// RoPE queues the in-place rotation of x [rows][heads][hd] f32 (rope.kern):
// pos holds rows i32 positions and invFreq hd/2 f32 inverse frequencies, both
// on the device.
func (o *Ops) RoPE(x, pos, invFreq Ptr, rows, heads, hd int) error {
	if rows <= 0 || heads <= 0 || hd <= 0 || hd%2 != 0 || int64(rows)*int64(heads) > 1<<31-1 {
		return fmt.Errorf("cuda: RoPE of %d×%d×%d", rows, heads, hd)
	}
	m, err := o.module("rope.kern")
	if err != nil {
		return err
	}
	block := uint32(min(max((hd/2+31)/32*32, 32), 256))
	return m.Launch("rope_f32", [3]uint32{uint32(rows * heads), 1, 1}, [3]uint32{block, 1, 1}, 0,
		x, pos, invFreq, uint32(heads), uint32(hd))
}

// Softcap queues x[i] = cap·tanh(x[i]/cap) for n f32 values.
func (o *Ops) Softcap(x Ptr, n int64, cap float32) error {
	if n <= 0 {
		return nil
	}
	m, err := o.module("rope.kern")
	if err != nil {
		return err
	}
	const block = 256
	return m.Launch("softcap_f32", [3]uint32{o.gridFor(n, block), 1, 1}, [3]uint32{block, 1, 1}, 0, x, uint64(n), cap)
}

// RowStats queues, for rows of v f32 logits, the entropy (nats) of
// softmax(z/temp) into entropy[r] and the first index of the maximum, as an
// f32 value, into argmax[r].
func (o *Ops) RowStats(logits, entropy, argmax Ptr, rows, v int, temp float32) error {
	if rows <= 0 || v <= 0 || v > 1<<24 || rows > 1<<31-1 {
		return fmt.Errorf("cuda: RowStats of %d×%d", rows, v)
	}
	m, err := o.module("rope.kern")
	if err != nil {
		return err
	}
	block := uint32(256)
	if v >= 8192 {
		block = 1024
	}
	return m.Launch("row_stats_f32", [3]uint32{uint32(rows), 1, 1}, [3]uint32{block, 1, 1}, 0,
		logits, entropy, argmax, uint32(v), temp)
}
