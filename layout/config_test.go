package layout

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseConfigTiny(t *testing.T) {
	c := tinyConfig(t)
	s, f := SlidingAttention, FullAttention
	want := &Config{
		ModelType: "diffusion_gemma", CanvasLength: 16, TieWordEmbeddings: true, HasVision: true,
		Text: TextConfig{
			HiddenSize: 64, NumLayers: 6, VocabSize: 512, NumHeads: 4, HeadDim: 32, NumKVHeads: 2,
			IntermediateSize: 96, NumExperts: 8, TopK: 2, MoEIntermediateSize: 32, SlidingWindow: 8,
			RMSNormEps: 1e-6, FinalLogitSoftcap: 30, HiddenActivation: "gelu_pytorch_tanh",
			LayerTypes: []string{s, s, f, s, s, f},
			Layers:     []LayerGeom{{s, 32, 2}, {s, 32, 2}, {f, 64, 1}, {s, 32, 2}, {s, 32, 2}, {f, 64, 1}},
			Rope: map[string]RopeParams{
				s: {Type: "default", Theta: 10000, PartialRotaryFactor: 1},
				f: {Type: "proportional", Theta: 1e6, PartialRotaryFactor: 0.25},
			},
			UseBidirectionalAttention: "", PadTokenID: 0, BOSTokenID: 2, EOSTokenIDs: []int{1},
			TieWordEmbeddings: true, MaxPositionEmbeddings: 4096,
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ParseConfig(tiny)\n got %+v\nwant %+v", c, want)
	}
}

func TestParseConfigHub(t *testing.T) {
	c := hubConfig(t)
	tc := c.Text
	if tc.HiddenSize != 2816 || tc.NumLayers != 30 || tc.VocabSize != 262144 || tc.NumHeads != 16 ||
		tc.HeadDim != 256 || tc.NumKVHeads != 8 || tc.IntermediateSize != 2112 || tc.NumExperts != 128 ||
		tc.TopK != 8 || tc.MoEIntermediateSize != 704 || tc.SlidingWindow != 1024 || tc.FinalLogitSoftcap != 30 ||
		tc.UseBidirectionalAttention != "vision" || tc.MaxPositionEmbeddings != 262144 || c.CanvasLength != 256 ||
		!c.HasVision || !c.TieWordEmbeddings {
		t.Errorf("hub config: %+v", c)
	}
	var full []int
	for i, g := range tc.Layers {
		want := LayerGeom{SlidingAttention, 256, 8}
		if (i+1)%6 == 0 {
			want = LayerGeom{FullAttention, 512, 2}
			full = append(full, i)
		}
		if g != want || tc.LayerTypes[i] != want.Type {
			t.Errorf("layer %d: %+v, want %+v", i, g, want)
		}
		if g.HasVProj() != (want.Type == SlidingAttention) {
			t.Errorf("layer %d: HasVProj %v", i, g.HasVProj())
		}
	}
	if !slices.Equal(full, []int{5, 11, 17, 23, 29}) {
		t.Errorf("full layers %v", full)
	}
	if tc.Rope[FullAttention] != (RopeParams{"proportional", 1e6, 0.25}) || tc.Rope[SlidingAttention] != (RopeParams{"default", 1e4, 1}) {
		t.Errorf("rope %+v", tc.Rope)
	}
	if !slices.Equal(tc.EOSTokenIDs, []int{1}) {
		t.Errorf("eos %v", tc.EOSTokenIDs)
	}
}

// mutate parses a testdata config, lets edit change its text_config (and the
// top level) and returns the new JSON.
func mutate(t testing.TB, file string, edit func(top, text map[string]any)) []byte {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(readTestdata(t, file), &top); err != nil {
		t.Fatal(err)
	}
	text, _ := top["text_config"].(map[string]any)
	edit(top, text)
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseConfigGeometryForms(t *testing.T) {
	geom := func(b []byte) []LayerGeom {
		t.Helper()
		c, err := ParseConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		return c.Text.Layers
	}
	// Neither form: full layers get head_dim 512 and num_key_value_heads.
	g := geom(mutate(t, "hub_26b_config.json", func(_, x map[string]any) {
		delete(x, "global_head_dim")
		delete(x, "num_global_key_value_heads")
	}))
	if g[5] != (LayerGeom{FullAttention, 512, 8}) || g[4] != (LayerGeom{SlidingAttention, 256, 8}) {
		t.Errorf("defaults: %v %v", g[4], g[5])
	}
	// Only num_global_key_value_heads: head_dim still defaults to 512.
	g = geom(mutate(t, "hub_26b_config.json", func(_, x map[string]any) { delete(x, "global_head_dim") }))
	if g[29] != (LayerGeom{FullAttention, 512, 2}) {
		t.Errorf("kv only: %v", g[29])
	}
	// null num_global_key_value_heads keeps num_key_value_heads.
	g = geom(mutate(t, "hub_26b_config.json", func(_, x map[string]any) { x["num_global_key_value_heads"] = nil }))
	if g[29] != (LayerGeom{FullAttention, 512, 8}) {
		t.Errorf("null kv: %v", g[29])
	}
	// per_layer_config wins over global_head_dim; zero-padded keys work.
	g = geom(mutate(t, "tiny_config.json", func(_, x map[string]any) {
		x["global_head_dim"] = 128
		x["per_layer_config"] = map[string]any{"02": map[string]any{"head_dim": 16}, "05": map[string]any{"num_key_value_heads": 4}}
	}))
	if g[2] != (LayerGeom{FullAttention, 16, 2}) || g[5] != (LayerGeom{FullAttention, 32, 4}) || g[0] != (LayerGeom{SlidingAttention, 32, 2}) {
		t.Errorf("per_layer_config: %v", g)
	}
	// layer_types absent: every 6th layer is full, and the last is forced full.
	c, err := ParseConfig(mutate(t, "tiny_config.json", func(_, x map[string]any) {
		delete(x, "layer_types")
		delete(x, "per_layer_config")
		x["num_hidden_layers"] = 8
	}))
	if err != nil {
		t.Fatal(err)
	}
	s, f := SlidingAttention, FullAttention
	if !slices.Equal(c.Text.LayerTypes, []string{s, s, s, s, s, f, s, f}) || c.Text.Layers[5].HeadDim != 512 {
		t.Errorf("default layer types %v %v", c.Text.LayerTypes, c.Text.Layers)
	}
	// A last sliding layer is forced to full, as transformers does.
	c, err = ParseConfig(mutate(t, "tiny_config.json", func(_, x map[string]any) {
		x["layer_types"] = []string{s, s, f, s, s, s}
		delete(x, "per_layer_config")
		x["global_head_dim"] = 64
		x["num_global_key_value_heads"] = 1
	}))
	if err != nil || c.Text.LayerTypes[5] != f || c.Text.Layers[5] != (LayerGeom{f, 64, 1}) {
		t.Errorf("forced last: %v %+v", err, c)
	}
}

func TestParseConfigHalving(t *testing.T) {
	for _, tt := range []struct {
		mode   any
		window int
		want   int
	}{{"all", 1024, 513}, {"all", 6, 4}, {"all", 7, 4}, {"vision", 1024, 1024}, {nil, 6, 6}} {
		c, err := ParseConfig(mutate(t, "hub_26b_config.json", func(_, x map[string]any) {
			x["use_bidirectional_attention"] = tt.mode
			x["sliding_window"] = tt.window
		}))
		if err != nil || c.Text.SlidingWindow != tt.want {
			t.Errorf("%v W=%d: %v, %v; want %d", tt.mode, tt.window, err, c, tt.want)
		}
	}
}

func TestParseConfigDefaultsAndForms(t *testing.T) {
	c, err := ParseConfig(mutate(t, "tiny_config.json", func(top, x map[string]any) {
		for _, k := range []string{"sliding_window", "rms_norm_eps", "hidden_activation", "rope_parameters",
			"pad_token_id", "bos_token_id", "eos_token_id", "max_position_embeddings", "tie_word_embeddings"} {
			delete(x, k)
		}
		delete(top, "canvas_length")
		delete(top, "vision_config")
		top["eos_token_id"] = []int{1, 106, 50}
		top["tie_word_embeddings"] = false
		x["hidden_size"] = 64.0
		x["final_logit_softcapping"] = 50.0
	}))
	if err != nil {
		t.Fatal(err)
	}
	tc := c.Text
	if tc.SlidingWindow != 512 || tc.RMSNormEps != 1e-6 || tc.HiddenActivation != "gelu_pytorch_tanh" ||
		tc.PadTokenID != 0 || tc.BOSTokenID != 2 || !slices.Equal(tc.EOSTokenIDs, []int{1, 106, 50}) ||
		tc.MaxPositionEmbeddings != 131072 || !tc.TieWordEmbeddings || c.TieWordEmbeddings || c.CanvasLength != 256 ||
		c.HasVision || tc.FinalLogitSoftcap != 50 || len(tc.Rope) != 2 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(top, x map[string]any)
		want string
	}{
		{"missing hidden", func(_, x map[string]any) { delete(x, "hidden_size") }, "config.json: text_config.hidden_size missing"},
		{"null hidden", func(_, x map[string]any) { x["hidden_size"] = nil }, "text_config.hidden_size missing"},
		{"zero hidden", func(_, x map[string]any) { x["hidden_size"] = 0 }, "text_config.hidden_size = 0 out of range"},
		{"huge hidden", func(_, x map[string]any) { x["hidden_size"] = 1 << 21 }, "text_config.hidden_size = 2097152 out of range"},
		{"string hidden", func(_, x map[string]any) { x["hidden_size"] = "64" }, "text_config.hidden_size: want an integer"},
		{"fraction hidden", func(_, x map[string]any) { x["hidden_size"] = 64.5 }, "text_config.hidden_size: want an integer"},
		{"huge number", func(_, x map[string]any) { x["vocab_size"] = 1e300 }, "text_config.vocab_size: want an integer"},
		{"layers", func(_, x map[string]any) { x["num_hidden_layers"] = 2000 }, "text_config.num_hidden_layers = 2000 out of range"},
		{"experts", func(_, x map[string]any) { x["num_experts"] = 5000 }, "text_config.num_experts"},
		{"top k", func(_, x map[string]any) { x["top_k_experts"] = 9 }, "text_config.top_k_experts = 9 out of range [1, 8]"},
		{"missing moe", func(_, x map[string]any) { delete(x, "moe_intermediate_size") }, "text_config.moe_intermediate_size missing"},
		{"layer_types length", func(_, x map[string]any) { x["layer_types"] = []string{"full_attention"} }, "text_config.layer_types has 1 entries, num_hidden_layers is 6"},
		{"layer type", func(_, x map[string]any) {
			x["layer_types"] = []string{"sliding_attention", "local", "full_attention", "sliding_attention", "sliding_attention", "full_attention"}
		}, `text_config.layer_types[1] = "local"`},
		{"layer_types type", func(_, x map[string]any) { x["layer_types"] = "full_attention" }, "text_config.layer_types: want a list"},
		{"kv divisibility", func(_, x map[string]any) { x["num_key_value_heads"] = 3 }, "text_config.num_attention_heads = 4 is not divisible by text_config.num_key_value_heads = 3"},
		{"full kv divisibility", func(_, x map[string]any) {
			x["per_layer_config"].(map[string]any)["2"].(map[string]any)["num_key_value_heads"] = 3
		}, "layer 2 (full_attention) num_attention_heads 4 is not divisible by 3 KV heads"},
		{"odd head_dim", func(_, x map[string]any) { x["head_dim"] = 33 }, "layer 0 (sliding_attention) head_dim 33 is odd"},
		{"per_layer key range", func(_, x map[string]any) { x["per_layer_config"].(map[string]any)["6"] = map[string]any{} }, `text_config.per_layer_config: key "6" is not a layer index`},
		{"per_layer key name", func(_, x map[string]any) { x["per_layer_config"].(map[string]any)["full_attention"] = map[string]any{} }, `key "full_attention" is not a layer index`},
		{"per_layer dup", func(_, x map[string]any) { x["per_layer_config"].(map[string]any)["02"] = map[string]any{} }, `keys "02" and "2" name the same layer`},
		{"per_layer value", func(_, x map[string]any) { x["per_layer_config"].(map[string]any)["2"] = 7 }, "text_config.per_layer_config.2 is not an object"},
		{"per_layer head_dim", func(_, x map[string]any) {
			x["per_layer_config"].(map[string]any)["2"].(map[string]any)["head_dim"] = 1 << 20
		}, "text_config.per_layer_config.2.head_dim = 1048576 out of range"},
		{"global head dim", func(_, x map[string]any) { delete(x, "per_layer_config"); x["global_head_dim"] = -2 }, "text_config.global_head_dim = -2 out of range"},
		{"model type", func(top, _ map[string]any) { top["model_type"] = "gemma4" }, `model_type "gemma4", want diffusion_gemma`},
		{"no model type", func(top, _ map[string]any) { delete(top, "model_type") }, "config.json: model_type missing"},
		{"text model type", func(_, x map[string]any) { x["model_type"] = "gemma4_text" }, `text_config.model_type "gemma4_text"`},
		{"no text", func(top, _ map[string]any) { delete(top, "text_config") }, "config.json: text_config missing"},
		{"text not object", func(top, _ map[string]any) { top["text_config"] = []int{1} }, "text_config is not an object"},
		{"vision not object", func(top, _ map[string]any) { top["vision_config"] = "x" }, "vision_config is not an object"},
		{"softcap null", func(_, x map[string]any) { x["final_logit_softcapping"] = nil }, "text_config.final_logit_softcapping is null"},
		{"softcap zero", func(_, x map[string]any) { x["final_logit_softcapping"] = 0 }, "text_config.final_logit_softcapping = 0 out of range"},
		{"eps", func(_, x map[string]any) { x["rms_norm_eps"] = -1 }, "text_config.rms_norm_eps = -1 out of range"},
		{"eps string", func(_, x map[string]any) { x["rms_norm_eps"] = "1e-6" }, "text_config.rms_norm_eps: want a number"},
		{"bidirectional", func(_, x map[string]any) { x["use_bidirectional_attention"] = "text" }, `use_bidirectional_attention "text"`},
		{"bidirectional type", func(_, x map[string]any) { x["use_bidirectional_attention"] = true }, "use_bidirectional_attention: want a string"},
		{"window", func(_, x map[string]any) { x["sliding_window"] = 0 }, "text_config.sliding_window = 0 out of range"},
		{"rope missing type", func(_, x map[string]any) { delete(x["rope_parameters"].(map[string]any), "full_attention") }, "text_config.rope_parameters.full_attention missing"},
		{"rope unknown key", func(_, x map[string]any) { x["rope_parameters"].(map[string]any)["rope_theta"] = 1.0 }, `text_config.rope_parameters: unknown key "rope_theta"`},
		{"rope theta", func(_, x map[string]any) {
			x["rope_parameters"].(map[string]any)["sliding_attention"].(map[string]any)["rope_theta"] = -5
		}, "text_config.rope_parameters.sliding_attention.rope_theta = -5 out of range"},
		{"rope theta missing", func(_, x map[string]any) {
			delete(x["rope_parameters"].(map[string]any)["sliding_attention"].(map[string]any), "rope_theta")
		}, "text_config.rope_parameters.sliding_attention.rope_theta missing"},
		{"rope factor", func(_, x map[string]any) {
			x["rope_parameters"].(map[string]any)["full_attention"].(map[string]any)["partial_rotary_factor"] = 2
		}, "partial_rotary_factor = 2 out of range"},
		{"eos empty", func(_, x map[string]any) { x["eos_token_id"] = []int{} }, "text_config.eos_token_id: want 1 to 64 ids"},
		{"eos negative", func(_, x map[string]any) { x["eos_token_id"] = []int{1, -3} }, "text_config.eos_token_id: want token ids"},
		{"pad beyond vocab", func(_, x map[string]any) { x["pad_token_id"] = 512 }, "text_config.pad_token_id = 512 out of range [0, 511]"},
		{"canvas", func(top, _ map[string]any) { top["canvas_length"] = 0 }, "canvas_length = 0 out of range"},
		{"tie type", func(top, _ map[string]any) { top["tie_word_embeddings"] = "yes" }, "tie_word_embeddings: want true or false"},
	}
	for _, tt := range tests {
		_, err := ParseConfig(mutate(t, "tiny_config.json", tt.edit))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "layout: config.json: ") {
			t.Errorf("%s: got %v, want ErrConfig with %q", tt.name, err, tt.want)
		}
	}
	for _, data := range []string{"", "null", "[]", "{", `"x"`, "{} trailing"} {
		if _, err := ParseConfig([]byte(data)); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseConfig(%q) = %v", data, err)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(readTestdata(f, "tiny_config.json"))
	f.Add(readTestdata(f, "hub_26b_config.json"))
	f.Add([]byte(`{"model_type":"diffusion_gemma","text_config":{"hidden_size":8,"num_hidden_layers":1,"vocab_size":4,` +
		`"num_attention_heads":2,"head_dim":2,"num_key_value_heads":1,"intermediate_size":2,"num_experts":2,` +
		`"top_k_experts":1,"moe_intermediate_size":2,"per_layer_config":{"0":{"head_dim":4}}}}`))
	f.Add([]byte(`{"model_type":"diffusion_gemma","text_config":{"layer_types":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if c != nil || !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseConfig = %v, %v", c, err)
			}
			return
		}
		tc := c.Text
		if len(tc.Layers) != tc.NumLayers || len(tc.LayerTypes) != tc.NumLayers || tc.NumLayers > MaxLayers {
			t.Fatalf("inconsistent layers: %+v", tc)
		}
		for _, g := range tc.Layers {
			if g.HeadDim <= 0 || g.KVHeads <= 0 || tc.NumHeads%g.KVHeads != 0 || g.HeadDim > MaxHeadDim {
				t.Fatalf("bad geometry %+v", g)
			}
		}
		for _, ts := range ExpectedText(c) {
			for _, d := range ts.Shape {
				if d <= 0 {
					t.Fatalf("%s: shape %v", ts.Name, ts.Shape)
				}
			}
		}
	})
}
