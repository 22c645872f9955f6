package layout

import (
	"fmt"
	"slices"
)

// ExpectedText lists every text tensor a checkpoint for this config stores,
// with its shape, in natural name order (DType left zero): the decoder's
// weights under model.decoder. and the encoder's untied
// model.encoder.language_model.layers.N.layer_scalar buffers. A config with
// tie_word_embeddings false also stores lm_head.weight and every encoder
// text weight.
func ExpectedText(c *Config) []Tensor {
	if c == nil {
		return nil
	}
	t := &c.Text
	H, V, I := int64(t.HiddenSize), int64(t.VocabSize), int64(t.IntermediateSize)
	E, F, nq := int64(t.NumExperts), int64(t.MoEIntermediateSize), int64(t.NumHeads)
	var out []Tensor
	add := func(name string, shape ...int64) { out = append(out, Tensor{Name: name, Shape: shape}) }
	languageModel := func(prefix string, decoder bool) {
		add(prefix+"embed_tokens.weight", V, H)
		add(prefix+"norm.weight", H)
		for l, g := range t.Layers {
			lp := fmt.Sprintf("%slayers.%d.", prefix, l)
			for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
				"post_feedforward_layernorm", "post_feedforward_layernorm_1", "pre_feedforward_layernorm_2",
				"post_feedforward_layernorm_2"} {
				add(lp+n+".weight", H)
			}
			add(lp+"layer_scalar", 1)
			hd, nkv := int64(g.HeadDim), int64(g.KVHeads)
			add(lp+"self_attn.q_proj.weight", nq*hd, H)
			add(lp+"self_attn.k_proj.weight", nkv*hd, H)
			if g.HasVProj() {
				add(lp+"self_attn.v_proj.weight", nkv*hd, H)
			}
			add(lp+"self_attn.o_proj.weight", H, nq*hd)
			add(lp+"self_attn.q_norm.weight", hd)
			add(lp+"self_attn.k_norm.weight", hd)
			add(lp+"mlp.gate_proj.weight", I, H)
			add(lp+"mlp.up_proj.weight", I, H)
			add(lp+"mlp.down_proj.weight", H, I)
			add(lp+"router.proj.weight", E, H)
			add(lp+"router.scale", H)
			add(lp+"router.per_expert_scale", E)
			add(lp+"experts.gate_up_proj", E, 2*F, H)
			add(lp+"experts.down_proj", E, H, F)
		}
		if decoder {
			add(prefix+"self_conditioning.pre_norm.weight", H)
			add(prefix+"self_conditioning.gate_proj.weight", I, H)
			add(prefix+"self_conditioning.up_proj.weight", I, H)
			add(prefix+"self_conditioning.down_proj.weight", H, I)
		}
	}
	languageModel(DecoderPrefix, true)
	if c.TieWordEmbeddings {
		for l := range t.Layers {
			add(fmt.Sprintf("%slayers.%d.layer_scalar", EncoderTextPrefix, l), 1)
		}
	} else {
		add(LMHeadName, V, H)
		languageModel(EncoderTextPrefix, false)
	}
	slices.SortFunc(out, func(a, b Tensor) int { return NaturalCompare(a.Name, b.Name) })
	return out
}

// CheckInventory compares a checkpoint's tensors with ExpectedText and
// returns an *InventoryError (wrapping ErrInventory) listing every missing
// text tensor, every unexpected tensor, every duplicate name and every shape
// mismatch, or nil. Vision tensors are accepted with any shape; copies of
// decoder text weights under model.encoder.language_model. and a tied
// lm_head.weight are accepted when their shape matches the decoder twin.
func CheckInventory(c *Config, tensors []Tensor) error {
	if c == nil {
		return fmt.Errorf("%w: no config", ErrInventory)
	}
	want := map[string][]int64{}
	expected := ExpectedText(c)
	for _, t := range expected {
		want[t.Name] = t.Shape
	}
	got := map[string][]int64{}
	count := map[string]int{}
	for _, t := range tensors {
		got[t.Name] = t.Shape
		count[t.Name]++
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.SortFunc(names, NaturalCompare)

	e := &InventoryError{}
	for _, n := range names {
		if count[n] > 1 {
			e.Duplicate = append(e.Duplicate, n)
			continue
		}
		shape := got[n]
		twin := n
		if _, ok := want[n]; !ok {
			switch {
			case IsVision(n):
				continue
			case n == LMHeadName:
				twin = DecoderPrefix + "embed_tokens.weight"
			default:
				if d, ok := DecoderTwin(n); ok {
					twin = d
				}
			}
		}
		w, ok := want[twin]
		if !ok {
			e.Unexpected = append(e.Unexpected, n)
			continue
		}
		if !slices.Equal(w, shape) {
			e.Mismatched = append(e.Mismatched, Mismatch{Name: n, Want: w, Got: slices.Clone(shape)})
		}
	}
	for _, t := range expected {
		if _, ok := got[t.Name]; !ok {
			e.Missing = append(e.Missing, t.Name)
		}
	}
	if e.Count() == 0 {
		return nil
	}
	return e
}
