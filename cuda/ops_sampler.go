package cuda

import "fmt"

// catThreads is categorical_f32's group size: each thread sums a contiguous
// chunk of ⌈v/catThreads⌉ weights and thread 0 scans the catThreads chunk
// sums, so the draw depends on it (and on nothing else of the launch).
const catThreads = 256

// Categorical queues, for rows r < rows of v f32 logits (v ≤ 2^24), out[r] =
// the index drawn with the f32 uniform us[r] in [0, 1) (sampler.kern's
// categorical_f32; us and out on the device).
func (o *Ops) Categorical(out, logits, us Ptr, rows, v int) error {
	if rows <= 0 || v <= 0 || v > 1<<24 || rows > 1<<31-1 {
		return fmt.Errorf("cuda: Categorical of %d×%d", rows, v)
	}
	m, err := o.module("sampler.kern")
	if err != nil {
		return err
	}
	groups := uint32(min(rows, 1<<20))
	return m.Launch("categorical_f32", [3]uint32{groups, 1, 1}, [3]uint32{catThreads, 1, 1}, 0,
		logits, us, out, uint32(rows), uint32(v))
}
