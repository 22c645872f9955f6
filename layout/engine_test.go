package layout

import (
	"maps"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// TestEngineRuns: the engine's table of formats per class (its
// TensorClass::supported_formats) and its rank-2 rule for q8.
func TestEngineRuns(t *testing.T) {
	for _, tc := range []struct {
		c    Class
		f    codecs.Format
		rank int
		want bool
	}{
		{Experts, codecs.Q4, 3, true}, {Experts, codecs.Q6, 3, true}, {Experts, codecs.NVFP4, 3, true},
		{Experts, codecs.Raw, 3, false}, {Experts, codecs.Q8, 3, false}, {Experts, codecs.Q5, 3, false},
		{Attn, codecs.Raw, 2, true}, {Attn, codecs.Q8, 2, true}, {Attn, codecs.Q4, 2, true}, {Attn, codecs.NVFP4, 2, true},
		{Attn, codecs.Q6, 2, false}, {Dense, codecs.Q6, 2, false}, {SC, codecs.Q6, 2, false}, {SC, codecs.Q5, 2, false},
		{Vision, codecs.Q6, 2, true}, {Vision, codecs.Q5, 2, false},
		{Norm, codecs.Raw, 1, true}, {Embed, codecs.Q8, 2, false}, {VisionOther, codecs.Raw, 2, true},
	} {
		if got := EngineRuns(tc.c, tc.f, tc.rank); got != tc.want {
			t.Errorf("EngineRuns(%v, %v, %d) = %v, want %v", tc.c, tc.f, tc.rank, got, tc.want)
		}
	}
}

// TestCustomClasses: what the manifest's custom_classes holds for a policy,
// as the engine writes it (experts expands to both substacks).
func TestCustomClasses(t *testing.T) {
	for _, tc := range []struct {
		profile string
		sets    []string
		want    map[string]string
	}{
		{"q4", nil, nil},
		{"nvfp4", nil, nil},
		{"nvfp4x", nil, map[string]string{"experts.gate_up": "nvfp4_block", "experts.down": "nvfp4_block"}},
		{"q4", []string{"attn=q8"}, map[string]string{"attn": "q8_row"}},
		{"q4", []string{"experts=q6", "sc=raw"}, map[string]string{"experts.gate_up": "q6_block", "experts.down": "q6_block", "sc": "raw"}},
		{"nvfp4x", []string{"experts=q4"}, map[string]string{"experts.gate_up": "q4_block", "experts.down": "q4_block"}},
	} {
		p := mustPolicy(t, tc.profile, tc.sets...)
		if got := p.CustomClasses(); !maps.Equal(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.profile, tc.sets, got, tc.want)
		}
	}
	if ProfileNVFP4X.EngineProfile() != "q4" || ProfileQ6.EngineProfile() != "q6" {
		t.Error("EngineProfile")
	}
}

// TestEngineIncompatibility: the plans the engine cannot run, and why.
func TestEngineIncompatibility(t *testing.T) {
	tensors := tinyTensors(t)
	for _, tc := range []struct {
		profile string
		sets    []string
		ok      bool
	}{
		{"q4", nil, true}, {"q6", nil, true}, {"nvfp4", nil, true}, {"nvfp4x", nil, true},
		{"q4", []string{"attn=q8"}, true}, {"q4", []string{"vision=q6"}, true},
		{"bf16", nil, false}, {"q5", nil, false}, {"q4", []string{"attn=q6"}, false},
		{"q4", []string{"experts=q8"}, false}, {"q4", []string{"dense=q5"}, false},
		// Both expert stacks in kinds the engine runs, but not one kind.
		{"q4", []string{"experts.down=q6"}, false}, {"q4", []string{"experts.gate_up=q6", "experts.down=q6"}, true},
	} {
		plan, err := MakePlan(mustPolicy(t, tc.profile, tc.sets...), tensors)
		if err != nil {
			t.Fatal(err)
		}
		if why := plan.EngineIncompatibility(); (why == "") != tc.ok {
			t.Errorf("%s %v: %q", tc.profile, tc.sets, why)
		}
	}
}
