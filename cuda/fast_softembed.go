package cuda

import "github.com/dgq-dev/dgq/codecs"

// softEmbedFast is SoftEmbed's PrecisionBF16 product for a raw bf16 table:
// out[n][H] = P[n][V]·T[V][H] with the probabilities rounded to bf16
// (narrow_bf16) and the stored table read as it is by cuBLAS GemmEx (bf16
// inputs, f32 accumulation and output). It reports handled = false, queueing
// nothing, in f32 precision or for another table format.
func (c *backend) softEmbedFast(out, probs Ptr, n, V, H int, tw *cudaWeight) (handled bool, err error) {
	if !c.k.fast || tw.f32 || tw.f != codecs.Raw || tw.dt != codecs.BF16 {
		return false, nil
	}
	pb, err := c.narrowBF16(scrSoftP16, probs, int64(n)*int64(V))
	if err != nil {
		return true, err
	}
	// Column-major outᵀ (H×n) = Tᵀ (H×V: the row-major table, ld H) · Pᵀ (V×n, ld V).
	return true, c.d.GemmEx(false, false, H, n, V, 1, tw.b.Ptr(), R16BF, H, pb, R16BF, V, 0, out, R32F, H)
}
