package enginepack

import (
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	const (
		gateUp = "model.decoder.layers.0.experts.gate_up_proj"
		down   = "model.decoder.layers.0.experts.down_proj"
		qProj  = "model.decoder.layers.0.self_attn.q_proj.weight"
		mlpUp  = "model.decoder.layers.0.mlp.up_proj.weight"
		sc     = "model.decoder.self_conditioning.gate_proj.weight"
		vq     = "model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"
		vproj  = "model.encoder.embed_vision.embedding_projection.weight"
	)
	r3 := []int64{16, 128, 96}
	r2 := []int64{128, 96}
	cases := []struct {
		name    string
		shape   []int64
		want    map[string]string // profile → kind; profiles left out are raw
		class   string
		comment string
	}{
		{gateUp, r3, map[string]string{"q4": KindQ4, "q5": KindQ4, "q6": KindQ6, "nvfp4": KindNVFP4, "nvfp4_experts": KindNVFP4}, ClassExpertsGateUp, ""},
		{down, r3, map[string]string{"q4": KindQ4, "q5": KindQ4, "q6": KindQ6, "nvfp4": KindNVFP4, "nvfp4_experts": KindNVFP4}, ClassExpertsDown, ""},
		{"model.decoder.layers.0.experts.gate_up_proj", r2, nil, "", "rank 2 is not an expert stack"},
		{"model.decoder.layers.0.experts.other_proj", r3, map[string]string{"q4": KindQ4, "q5": KindQ4, "q6": KindQ6, "nvfp4": KindNVFP4, "nvfp4_experts": KindNVFP4}, "", "quantized, but no knob reaches it"},
		{qProj, r2, map[string]string{"nvfp4": KindNVFP4}, ClassAttn, ""},
		{"model.decoder.layers.0.self_attn.q_proj.bias", []int64{96}, nil, "", ""},
		{mlpUp, r2, map[string]string{"nvfp4": KindNVFP4}, ClassDense, ""},
		{sc, r2, allProfiles(KindQ8), ClassSC, ""},
		{"model.decoder.self_conditioning.pre_norm.weight", []int64{96}, nil, "", "norm before self_conditioning"},
		{"model.decoder.self_conditioning.bias", []int64{96}, allProfiles(KindQ8), "", "q8 for any rank; fails ValidateFormatDims"},
		{vq, []int64{32, 32}, map[string]string{"nvfp4": KindNVFP4}, ClassVision, "the nvfp4 profile reaches vision linears"},
		{vproj, []int64{96, 32}, nil, ClassVision, ""},
		{"model.encoder.vision_tower.patch_embedder.input_proj.weight", []int64{32, 768}, nil, "", ""},
		{"model.decoder.layers.0.router.proj.weight", []int64{16, 96}, nil, "", "locked"},
		{"model.decoder.layers.0.router.scale", []int64{96}, nil, "", "locked"},
		{"model.decoder.embed_tokens.weight", []int64{640, 96}, nil, "", "locked"},
		{"model.decoder.layers.0.layer_scalar", []int64{1}, nil, "", "locked"},
		{"model.decoder.layers.0.input_layernorm.weight", []int64{96}, nil, "", "locked by layernorm"},
		{"model.decoder.layers.0.self_attn.k_norm.weight", []int64{32}, nil, "", ""},
	}
	for _, c := range cases {
		for _, p := range profiles {
			want := c.want[p]
			if want == "" {
				want = KindRaw
			}
			if got := Classify(c.name, c.shape, p); got != want {
				t.Errorf("Classify(%s %v, %s) = %s, want %s (%s)", c.name, c.shape, p, got, want, c.comment)
			}
		}
		if got := ClassOf(c.name, c.shape); got != c.class {
			t.Errorf("ClassOf(%s %v) = %q, want %q", c.name, c.shape, got, c.class)
		}
	}
}

func allProfiles(kind string) map[string]string {
	m := map[string]string{}
	for _, p := range profiles {
		m[p] = kind
	}
	return m
}

func TestClassifyCustom(t *testing.T) {
	ov, err := ParseOverrides(map[string]string{ClassAttn: "q8", ClassExpertsDown: KindNVFP4})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		shape []int64
		want  string
	}{
		{"model.decoder.layers.0.self_attn.o_proj.weight", []int64{96, 192}, KindQ8},
		{"model.decoder.layers.0.experts.down_proj", []int64{4, 96, 64}, KindNVFP4},
		{"model.decoder.layers.0.experts.gate_up_proj", []int64{4, 128, 96}, KindQ6},
		{"model.decoder.layers.0.mlp.down_proj.weight", []int64{96, 128}, KindRaw},
		{"model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", []int64{32, 32}, KindRaw},
	}
	for _, c := range cases {
		if got := ClassifyCustom(c.name, c.shape, "q6", ov); got != c.want {
			t.Errorf("ClassifyCustom(%s) = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestParseOverrides(t *testing.T) {
	for _, bad := range []map[string]string{
		{"embed": "q8"}, {"router": "raw"}, {"norms": "raw"}, {"experts": "q4"}, {"bogus": "q4"},
		{ClassAttn: "q5"}, {ClassAttn: "q5_block"},
	} {
		if _, err := ParseOverrides(bad); err == nil {
			t.Errorf("ParseOverrides(%v) accepted", bad)
		}
	}
	good, err := ParseOverrides(map[string]string{ClassExpertsGateUp: "nvfp4", ClassExpertsDown: "q6", ClassSC: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(good) != "map[experts.down:q6_block experts.gate_up:nvfp4_block sc:raw]" {
		t.Errorf("parsed %v", good)
	}
	if CheckCLIOverrides(good) == nil {
		t.Error("diverging expert kinds must fail the CLI check")
	}
	if CheckCLIOverrides(map[string]string{ClassAttn: KindQ6}) == nil {
		t.Error("q6 attn must fail the CLI check")
	}
	if err := CheckCLIOverrides(map[string]string{ClassVision: KindQ6, ClassAttn: KindQ8}); err != nil {
		t.Error(err)
	}
}

func TestValidateFormatDims(t *testing.T) {
	cases := []struct {
		shape []int64
		kind  string
		ok    bool
	}{
		{[]int64{64, 33}, KindQ4, false}, {[]int64{64, 32}, KindQ4, true},
		{[]int64{64, 48}, KindQ6, false}, {[]int64{64, 64}, KindQ6, true},
		{[]int64{64, 17}, KindNVFP4, false}, {[]int64{64, 16}, KindNVFP4, true},
		{[]int64{4, 64, 48}, KindNVFP4, true}, {[]int64{128, 64, 32}, KindQ8, false},
		{[]int64{128, 64}, KindQ8, true}, {[]int64{1}, KindRaw, true}, {[]int64{}, KindQ4, false},
		{[]int64{64}, KindQ4, true}, // only the last dimension is checked
	}
	for _, c := range cases {
		if err := ValidateFormatDims("t", c.shape, c.kind); (err == nil) != c.ok {
			t.Errorf("ValidateFormatDims(%v, %s) = %v, want ok=%v", c.shape, c.kind, err, c.ok)
		}
	}
}

func TestVersionRule(t *testing.T) {
	cases := []struct {
		profile                   string
		custom, layered, hasNVFP4 bool
		want                      uint32
	}{
		{"q4", false, false, false, 1}, {"q5", false, false, false, 1}, {"q6", false, false, false, 1},
		{"nvfp4", false, false, true, 2}, {"nvfp4_experts", false, false, true, 2},
		{"nvfp4", false, false, false, 2}, {"q4", false, false, true, 2},
		{"q4", false, true, false, 3}, {"nvfp4", false, true, true, 3},
		{"q4", true, false, true, 4}, {"q4", true, true, false, 4},
	}
	for _, c := range cases {
		if got := Version(c.profile, c.custom, c.layered, c.hasNVFP4); got != c.want {
			t.Errorf("Version(%+v) = %d, want %d", c, got, c.want)
		}
	}
}
