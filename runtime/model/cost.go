package model

import "github.com/dgq-dev/dgq/layout"

// StepMACs is the multiply-adds of one self-conditioned denoising step over
// positions canvas positions of the model c describes, from its config: per
// position, every decoder layer's projections (q, k, v where the layer has
// one, o), dense MLP, router and its top-k experts, then the lm_head and the
// self-conditioning path (the soft embedding over the vocabulary and its
// MLP). Attention scores, norms and element-wise ops are left out (a few
// percent at a prompt of a few hundred tokens). At the released model's
// shapes and 256 positions it is about 1.1·10¹² (docs/runtime.md, "Speed of
// the CPU backend"), a one-layer model of the same width 0.41·10¹²: the
// work a CPU backend does per step.
func StepMACs(c *layout.Config, positions int) float64 {
	t := &c.Text
	H, V, I := float64(t.HiddenSize), float64(t.VocabSize), float64(t.IntermediateSize)
	var perPos float64
	for _, g := range t.Layers {
		q, kv := float64(t.NumHeads*g.HeadDim), float64(g.KVHeads*g.HeadDim)
		perPos += 2*q*H + kv*H // q and o, k
		if g.HasVProj() {
			perPos += kv * H
		}
		perPos += 3*I*H + float64(t.NumExperts)*H                          // dense MLP, router
		perPos += float64(t.TopK) * 3 * float64(t.MoEIntermediateSize) * H // experts: gate, up, down
	}
	perPos += 2*V*H + 3*I*H // lm_head, soft embedding, self-conditioning MLP
	return perPos * float64(positions)
}
