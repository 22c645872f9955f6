package layout

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// The config's expected text tensors are exactly the tiny checkpoint's
// non-vision tensors, in the same (natural) order.
func TestExpectedTextTiny(t *testing.T) {
	var want []Tensor
	for _, ts := range tinyTensors(t) {
		if !IsVision(ts.Name) {
			want = append(want, Tensor{Name: ts.Name, Shape: ts.Shape})
		}
	}
	got := ExpectedText(tinyConfig(t))
	if !reflect.DeepEqual(got, want) {
		gn, wn := names(got), names(want)
		for _, n := range wn {
			if !slices.Contains(gn, n) {
				t.Errorf("missing %s", n)
			}
		}
		for _, n := range gn {
			if !slices.Contains(wn, n) {
				t.Errorf("extra %s", n)
			}
		}
		t.Fatalf("ExpectedText(tiny) differs from the checkpoint (%d vs %d tensors)", len(got), len(want))
	}
	if err := CheckInventory(tinyConfig(t), tinyTensors(t)); err != nil {
		t.Fatal(err)
	}
}

func names(ts []Tensor) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// The 26B config's expected tensors add up to MODEL_SPEC §2.6's budget.
func TestExpectedTextHub(t *testing.T) {
	ts := ExpectedText(hubConfig(t))
	var total, experts, embed int64
	shapes := map[string][]int64{}
	for _, x := range ts {
		n := int64(1)
		for _, d := range x.Shape {
			n *= d
		}
		total += n
		shapes[x.Name] = x.Shape
		switch c, _, _ := Classify(x.Name, len(x.Shape)); c {
		case Experts:
			experts += n
		case Embed:
			embed += n
		}
	}
	if total < 25.2e9 || total > 25.3e9 {
		t.Errorf("total text params %d, want ≈25.25B", total)
	}
	if experts != 30*128*(1408*2816+2816*704) || embed != 262144*2816 {
		t.Errorf("experts %d, embed %d", experts, embed)
	}
	for name, want := range map[string][]int64{
		"model.decoder.layers.0.self_attn.q_proj.weight":      {4096, 2816},
		"model.decoder.layers.0.self_attn.v_proj.weight":      {2048, 2816},
		"model.decoder.layers.5.self_attn.q_proj.weight":      {8192, 2816},
		"model.decoder.layers.5.self_attn.k_proj.weight":      {1024, 2816},
		"model.decoder.layers.5.self_attn.o_proj.weight":      {2816, 8192},
		"model.decoder.layers.5.self_attn.k_norm.weight":      {512},
		"model.decoder.layers.29.experts.gate_up_proj":        {128, 1408, 2816},
		"model.decoder.layers.29.experts.down_proj":           {128, 2816, 704},
		"model.decoder.layers.29.router.per_expert_scale":     {128},
		"model.decoder.self_conditioning.down_proj.weight":    {2816, 2112},
		"model.encoder.language_model.layers.29.layer_scalar": {1},
	} {
		if !slices.Equal(shapes[name], want) {
			t.Errorf("%s: %v, want %v", name, shapes[name], want)
		}
	}
	if _, ok := shapes["model.decoder.layers.5.self_attn.v_proj.weight"]; ok {
		t.Error("full layer has a v_proj")
	}
	// embed, norm, 4 SC tensors, 22 per layer less 5 full-layer v_proj, 30 encoder layer_scalar.
	if len(ts) != 1+1+4+30*22-5+30 {
		t.Errorf("%d tensors", len(ts))
	}
	// The 26B plan lays out too (no file needed: the plan is plain data).
	for i := range ts {
		ts[i].DType = codecs.BF16
	}
	p := mustPolicy(t, "q4")
	plan, err := MakePlan(p, ts)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, plan, p, len(ts))
}

func TestExpectedTextUntied(t *testing.T) {
	c := tinyConfig(t)
	c.TieWordEmbeddings = false
	ts := ExpectedText(c)
	var enc, lm int
	for _, x := range ts {
		if strings.HasPrefix(x.Name, EncoderTextPrefix) {
			enc++
		}
		if x.Name == LMHeadName {
			lm++
		}
	}
	// embed + norm, then 22 tensors per sliding layer and 21 per full layer (no v_proj).
	if lm != 1 || enc != 2+4*22+2*21 {
		t.Errorf("untied: %d lm_head, %d encoder tensors", lm, enc)
	}
	tensors := ExpectedText(c)
	if err := CheckInventory(c, tensors); err != nil {
		t.Error(err)
	}
	if ExpectedText(nil) != nil {
		t.Error("ExpectedText(nil)")
	}
}

func TestCheckInventoryFindings(t *testing.T) {
	c := tinyConfig(t)
	base := tinyTensors(t)
	var tensors []Tensor
	for _, x := range base {
		switch x.Name {
		case "model.decoder.layers.3.self_attn.v_proj.weight", "model.decoder.norm.weight":
			continue // missing
		case "model.decoder.layers.2.self_attn.q_proj.weight":
			x.Shape = []int64{128, 64} // full layer with the sliding geometry
		case "model.encoder.vision_tower.patch_embedder.input_proj.weight":
			x.Shape = []int64{7, 7, 7} // vision: any shape is fine
		}
		tensors = append(tensors, x)
	}
	bf := codecs.BF16
	tensors = append(tensors,
		Tensor{"model.decoder.layers.2.self_attn.v_proj.weight", bf, []int64{64, 64}},                // K=V layer
		Tensor{"model.decoder.layers.6.input_layernorm.weight", bf, []int64{64}},                     // beyond L
		Tensor{"model.decoder.bogus", bf, []int64{1}},                                                // unknown
		Tensor{"model.encoder.language_model.layers.1.mlp.up_proj.weight", bf, []int64{96, 64}},      // tied copy, fine
		Tensor{"model.encoder.language_model.norm.weight", bf, []int64{65}},                          // tied copy, wrong shape
		Tensor{"model.encoder.language_model.layers.2.self_attn.v_proj.weight", bf, []int64{64, 64}}, // copy of nothing
		Tensor{LMHeadName, bf, []int64{512, 64}},                                                     // tied lm_head, fine
		Tensor{"model.decoder.layers.0.layer_scalar", bf, []int64{1}},                                // duplicate
	)
	err := CheckInventory(c, tensors)
	var ie *InventoryError
	if !errors.Is(err, ErrInventory) || !errors.As(err, &ie) {
		t.Fatalf("want *InventoryError, got %v", err)
	}
	want := &InventoryError{
		Missing: []string{"model.decoder.layers.3.self_attn.v_proj.weight", "model.decoder.norm.weight"},
		Unexpected: []string{
			"model.decoder.bogus",
			"model.decoder.layers.2.self_attn.v_proj.weight",
			"model.decoder.layers.6.input_layernorm.weight",
			"model.encoder.language_model.layers.2.self_attn.v_proj.weight",
		},
		Duplicate: []string{"model.decoder.layers.0.layer_scalar"},
		Mismatched: []Mismatch{
			{"model.decoder.layers.2.self_attn.q_proj.weight", []int64{256, 64}, []int64{128, 64}},
			{"model.encoder.language_model.norm.weight", []int64{64}, []int64{65}},
		},
	}
	if !reflect.DeepEqual(ie, want) {
		t.Errorf("findings\n got %+v\nwant %+v", ie, want)
	}
	msg := err.Error()
	for _, s := range []string{"layout: checkpoint does not match config: 9 problem(s)", "missing model.decoder.norm.weight",
		"unexpected model.decoder.bogus", "duplicate model.decoder.layers.0.layer_scalar",
		"shape model.decoder.layers.2.self_attn.q_proj.weight: got [128 64], want [256 64]"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q:\n%s", s, msg)
		}
	}
	if err := CheckInventory(nil, tensors); !errors.Is(err, ErrInventory) {
		t.Errorf("nil config: %v", err)
	}
}
