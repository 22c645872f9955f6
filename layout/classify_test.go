package layout

import (
	"errors"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	d := "model.decoder."
	enc := "model.encoder.language_model."
	tests := []struct {
		name  string
		rank  int
		class Class
		role  Role
	}{
		{d + "embed_tokens.weight", 2, Embed, RoleNone},
		{"lm_head.weight", 2, Embed, RoleNone},
		{d + "norm.weight", 1, Norm, RoleNone},
		{d + "self_conditioning.pre_norm.weight", 1, Norm, RoleNone},
		{d + "self_conditioning.gate_proj.weight", 2, SC, RoleNone},
		{d + "self_conditioning.up_proj.weight", 2, SC, RoleNone},
		{d + "self_conditioning.down_proj.weight", 2, SC, RoleNone},
		{d + "layers.0.input_layernorm.weight", 1, Norm, RoleNone},
		{d + "layers.0.post_attention_layernorm.weight", 1, Norm, RoleNone},
		{d + "layers.0.pre_feedforward_layernorm.weight", 1, Norm, RoleNone},
		{d + "layers.0.post_feedforward_layernorm.weight", 1, Norm, RoleNone},
		{d + "layers.0.post_feedforward_layernorm_1.weight", 1, Norm, RoleNone},
		{d + "layers.0.pre_feedforward_layernorm_2.weight", 1, Norm, RoleNone},
		{d + "layers.0.post_feedforward_layernorm_2.weight", 1, Norm, RoleNone},
		{d + "layers.29.layer_scalar", 1, LayerScalar, RoleNone},
		{enc + "layers.29.layer_scalar", 1, LayerScalar, RoleNone},
		{d + "layers.5.self_attn.q_proj.weight", 2, Attn, RoleNone},
		{d + "layers.5.self_attn.k_proj.weight", 2, Attn, RoleNone},
		{d + "layers.4.self_attn.v_proj.weight", 2, Attn, RoleNone},
		{d + "layers.5.self_attn.o_proj.weight", 2, Attn, RoleNone},
		{d + "layers.5.self_attn.q_norm.weight", 1, Norm, RoleNone},
		{d + "layers.5.self_attn.k_norm.weight", 1, Norm, RoleNone},
		{d + "layers.10.mlp.gate_proj.weight", 2, Dense, RoleNone},
		{d + "layers.10.mlp.up_proj.weight", 2, Dense, RoleNone},
		{d + "layers.10.mlp.down_proj.weight", 2, Dense, RoleNone},
		{d + "layers.1.router.proj.weight", 2, Router, RoleNone},
		{d + "layers.1.router.scale", 1, Router, RoleNone},
		{d + "layers.1.router.per_expert_scale", 1, Router, RoleNone},
		{d + "layers.1.experts.gate_up_proj", 3, Experts, RoleGateUp},
		{d + "layers.1.experts.down_proj", 3, Experts, RoleDown},
		{d + "layers.1023.experts.down_proj", 3, Experts, RoleDown},
		// Copies of decoder weights under the encoder (a checkpoint saved untied).
		{enc + "embed_tokens.weight", 2, Embed, RoleNone},
		{enc + "norm.weight", 1, Norm, RoleNone},
		{enc + "layers.3.self_attn.q_proj.weight", 2, Attn, RoleNone},
		{enc + "layers.3.mlp.down_proj.weight", 2, Dense, RoleNone},
		{enc + "layers.3.router.scale", 1, Router, RoleNone},
		{enc + "layers.3.experts.gate_up_proj", 3, Experts, RoleGateUp},
		{enc + "layers.3.post_feedforward_layernorm_2.weight", 1, Norm, RoleNone},
		// Vision: matrices are vision, 1-D vectors stay raw as norm.
		{"model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", 2, Vision, RoleNone},
		{"model.encoder.vision_tower.encoder.layers.0.mlp.down_proj.linear.weight", 2, Vision, RoleNone},
		{"model.encoder.vision_tower.patch_embedder.input_proj.weight", 2, VisionOther, RoleNone},
		{"model.encoder.vision_tower.patch_embedder.position_embedding_table", 3, VisionOther, RoleNone},
		{"model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", 2, Vision, RoleNone},
		{"model.encoder.vision_tower.encoder.layers.0.mlp.down_proj.linear.weight", 2, Vision, RoleNone},
		{"model.encoder.vision_tower.encoder.layers.0.input_layernorm.weight", 1, Norm, RoleNone},
		{"model.encoder.vision_tower.encoder.layers.0.self_attn.q_norm.weight", 1, Norm, RoleNone},
		{"model.encoder.vision_tower.std_bias", 1, Norm, RoleNone},
		{"model.encoder.vision_tower.std_scale", 1, Norm, RoleNone},
		{"model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj.linear.input_min", 0, Norm, RoleNone},
		{"model.encoder.embed_vision.embedding_projection.weight", 2, Vision, RoleProjection},
	}
	for _, tt := range tests {
		c, r, err := Classify(tt.name, tt.rank)
		if err != nil || c != tt.class || r != tt.role {
			t.Errorf("Classify(%q, %d) = %v, %v, %v; want %v, %v", tt.name, tt.rank, c, r, err, tt.class, tt.role)
		}
	}
}

func TestClassifyUnknown(t *testing.T) {
	for _, name := range []string{
		"",
		"model.decoder.",
		"model.decoder.embed_tokens",
		"model.decoder.embed_tokens.weight.extra",
		"decoder.embed_tokens.weight",
		"model.decoder.lm_head.weight",
		"model.decoder.layers.0.self_attn.v_norm.weight",
		"model.decoder.layers.0.pre_feedforward_layernorm_1.weight",
		"model.decoder.layers.0.experts.gate_up_proj.weight",
		"model.decoder.layers.0.experts.up_proj",
		"model.decoder.layers.0.mlp.gate_proj",
		"model.decoder.layers.0.router.proj",
		"model.decoder.layers.0.layer_scalar.weight",
		"model.decoder.layers..input_layernorm.weight",
		"model.decoder.layers.x.input_layernorm.weight",
		"model.decoder.layers.01.input_layernorm.weight",
		"model.decoder.layers.-1.input_layernorm.weight",
		"model.decoder.layers.12345.input_layernorm.weight",
		"model.decoder.layers.0",
		"model.decoder.rotary_emb.sliding_attention_inv_freq",
		"model.decoder.self_conditioning.post_norm.weight",
		"model.encoder.language_model.self_conditioning.gate_proj.weight",
		"model.encoder.language_model.rotary_emb.full_attention_inv_freq",
		"model.encoder.vision_tower.",
		"model.encoder.vision_tower..weight",
		"model.encoder.embed_vision",
		"model.encoder.something.weight",
		"xmodel.decoder.norm.weight",
		"model.decoder.layers.0.self_attn.q_proj.weightx",
		"model.decoder.norm.weight ",
	} {
		c, r, err := Classify(name, 2)
		if !errors.Is(err, ErrUnknownTensor) {
			t.Errorf("Classify(%q) = %v, %v, %v; want ErrUnknownTensor", name, c, r, err)
			continue
		}
		if !strings.Contains(err.Error(), "layout: ") || !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %q", err, name)
		}
	}
}

func TestDecoderTwinAndIsVision(t *testing.T) {
	if d, ok := DecoderTwin("model.encoder.language_model.layers.2.mlp.up_proj.weight"); !ok ||
		d != "model.decoder.layers.2.mlp.up_proj.weight" {
		t.Errorf("DecoderTwin = %q, %v", d, ok)
	}
	for _, n := range []string{"model.decoder.norm.weight", "model.encoder.language_model.bogus",
		"model.encoder.language_model.self_conditioning.up_proj.weight"} {
		if _, ok := DecoderTwin(n); ok {
			t.Errorf("DecoderTwin(%q) ok", n)
		}
	}
	if !IsVision("model.encoder.embed_vision.embedding_projection.weight") || IsVision("model.encoder.vision_tower.") ||
		IsVision("model.decoder.norm.weight") {
		t.Error("IsVision wrong")
	}
}

// Every tensor of the real tiny checkpoint classifies.
func TestClassifyTinyCheckpoint(t *testing.T) {
	counts := map[Class]int{}
	for _, ts := range tinyTensors(t) {
		c, _, err := Classify(ts.Name, len(ts.Shape))
		if err != nil {
			t.Fatal(err)
		}
		counts[c]++
	}
	want := map[Class]int{Experts: 12, Attn: 22, Dense: 18, SC: 3, Vision: 8, VisionOther: 2, Embed: 1, Router: 18,
		Norm: 6*9 + 2 + 6, LayerScalar: 12}
	for c, n := range want {
		if counts[c] != n {
			t.Errorf("%v: %d tensors, want %d", c, counts[c], n)
		}
	}
}
