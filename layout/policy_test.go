package layout

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

func TestParseProfile(t *testing.T) {
	for _, s := range []string{"bf16", "q4", "q5", "q6", "nvfp4", "nvfp4x"} {
		p, err := ParseProfile(s)
		if err != nil || string(p) != s {
			t.Errorf("ParseProfile(%q) = %q, %v", s, p, err)
		}
	}
	for s, want := range map[string]Profile{"Q4": ProfileQ4, "NVFP4X": ProfileNVFP4X, "Bf16": ProfileBF16} {
		if p, err := ParseProfile(s); err != nil || p != want {
			t.Errorf("ParseProfile(%q) = %q, %v; want %q", s, p, err, want)
		}
	}
	for _, s := range []string{"", "q8", "raw", "nvfp4 "} {
		_, err := ParseProfile(s)
		if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), "bf16, q4, q5, q6, nvfp4, nvfp4x") {
			t.Errorf("ParseProfile(%q) = %v", s, err)
		}
	}
}

// TestProfileFormats is the full profile × class table with no overrides.
func TestProfileFormats(t *testing.T) {
	R, Q8, Q4, Q5, Q6, NV := codecs.Raw, codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4
	//                       experts attn dense sc vision
	table := map[Profile][5]codecs.Format{
		ProfileBF16:   {R, R, R, R, R},
		ProfileQ4:     {Q4, R, R, Q8, R},
		ProfileQ5:     {Q5, R, R, Q8, R},
		ProfileQ6:     {Q6, R, R, Q8, R},
		ProfileNVFP4:  {NV, NV, NV, Q8, NV}, // vision linears; the projection is raw (below)
		ProfileNVFP4X: {NV, R, R, Q8, R},
	}
	if len(table) != len(Profiles()) {
		t.Fatal("table does not cover every profile")
	}
	for prof, row := range table {
		p := mustPolicy(t, string(prof))
		for i, c := range []Class{Experts, Attn, Dense, SC, Vision} {
			roles := []Role{RoleNone}
			if c == Experts {
				roles = []Role{RoleNone, RoleGateUp, RoleDown}
			}
			for _, r := range roles {
				if got := p.Format(c, r); got != row[i] {
					t.Errorf("%s: Format(%v, %v) = %v, want %v", prof, c, r, got, row[i])
				}
			}
		}
		if got := p.Format(Vision, RoleProjection); got != R && prof != ProfileBF16 {
			t.Errorf("%s: vision projection = %v, want raw", prof, got)
		}
		for _, c := range []Class{Embed, Router, Norm, LayerScalar, VisionOther} {
			if got := p.Format(c, RoleNone); got != R {
				t.Errorf("%s: locked %v = %v", prof, c, got)
			}
		}
		if got := p.Format(ClassInvalid, RoleNone); got != codecs.FormatInvalid {
			t.Errorf("%s: Format(invalid) = %v", prof, got)
		}
	}
	if (Policy{}).Format(Experts, RoleGateUp) != codecs.FormatInvalid {
		t.Error("zero policy resolves a format")
	}
}

func TestParseOverride(t *testing.T) {
	good := map[string]Override{
		"experts=q6":         {TargetExperts, codecs.Q6},
		"experts.gate_up=q4": {TargetExpertsGateUp, codecs.Q4},
		"experts.down=nvfp4": {TargetExpertsDown, codecs.NVFP4},
		"attn=q8":            {TargetAttn, codecs.Q8},
		"dense=raw":          {TargetDense, codecs.Raw},
		"sc=q5":              {TargetSC, codecs.Q5},
		"vision=q8":          {TargetVision, codecs.Q8},
		" vision = nvfp4 ":   {TargetVision, codecs.NVFP4},
		"attn=Q4":            {TargetAttn, codecs.Q4},
		"Experts.Down=NVFP4": {TargetExpertsDown, codecs.NVFP4},
		"experts=bf16":       {TargetExperts, codecs.Raw},
		"dense=BF16":         {TargetDense, codecs.Raw},
	}
	for s, want := range good {
		o, err := ParseOverride(s)
		if err != nil || o != want {
			t.Errorf("ParseOverride(%q) = %v, %v; want %v", s, o, err, want)
		}
	}
	reasons := map[string]string{
		"embed": "lm_head", "embed_tokens": "lm_head", "lm_head": "embedding", "router": "routing",
		"norm": "precision-sensitive", "norms": "precision-sensitive", "layer_scalar": "precision-sensitive",
	}
	for target, reason := range reasons {
		for _, f := range []string{"q4", "raw", "bogus"} {
			_, err := ParseOverride(target + "=" + f)
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), reason) || !strings.Contains(err.Error(), target) {
				t.Errorf("ParseOverride(%s=%s) = %v; want ErrLocked with %q", target, f, err, reason)
			}
		}
	}
	for _, s := range []string{"expert=q4", "mlp=q4", "experts.gate=q4", "all=q4"} {
		_, err := ParseOverride(s)
		if !errors.Is(err, ErrTarget) || !strings.Contains(err.Error(), "experts, experts.gate_up, experts.down, attn, dense, sc, vision") {
			t.Errorf("ParseOverride(%q) = %v; want ErrTarget listing targets", s, err)
		}
	}
	for _, s := range []string{"attn=q3", "attn=invalid", "experts=f16", "attn=q4,q8"} {
		if _, err := ParseOverride(s); !errors.Is(err, codecs.ErrUnknownFormat) {
			t.Errorf("ParseOverride(%q) = %v; want codecs.ErrUnknownFormat", s, err)
		}
	}
	for _, s := range []string{"", "attn", "=q4", "attn=", "="} {
		if _, err := ParseOverride(s); !errors.Is(err, ErrOverrideSyntax) {
			t.Errorf("ParseOverride(%q) = %v; want ErrOverrideSyntax", s, err)
		}
	}
	b, err := json.Marshal(Override{TargetAttn, codecs.Q8})
	if err != nil || string(b) != `{"target":"attn","format":"q8"}` {
		t.Errorf("json = %s, %v", b, err)
	}
}

func TestNewPolicy(t *testing.T) {
	tests := []struct {
		profile string
		sets    []string
		err     error
		// expected formats when err is nil
		gateUp, down, attn, vision codecs.Format
		overrides                  int
	}{
		{"q4", nil, nil, codecs.Q4, codecs.Q4, codecs.Raw, codecs.Raw, 0},
		{"q4", []string{"experts=q6"}, nil, codecs.Q6, codecs.Q6, codecs.Raw, codecs.Raw, 1},
		{"q4", []string{"experts.gate_up=q6", "experts.down=q6"}, nil, codecs.Q6, codecs.Q6, codecs.Raw, codecs.Raw, 2},
		{"q4", []string{"experts=q8", "experts.down=q8"}, nil, codecs.Q8, codecs.Q8, codecs.Raw, codecs.Raw, 2},
		{"nvfp4", []string{"attn=raw", "vision=q8"}, nil, codecs.NVFP4, codecs.NVFP4, codecs.Raw, codecs.Q8, 2},
		{"q4", []string{"attn=q8", "attn=q8"}, nil, codecs.Q4, codecs.Q4, codecs.Q8, codecs.Raw, 1},
		{"bf16", []string{"experts=q4", "experts.down=q4"}, nil, codecs.Q4, codecs.Q4, codecs.Raw, codecs.Raw, 2},
		// The two expert stacks in different formats (a dgq-only pack).
		{"q4", []string{"experts.down=q6"}, nil, codecs.Q4, codecs.Q6, codecs.Raw, codecs.Raw, 1},
		{"q4", []string{"experts.down=q8"}, nil, codecs.Q4, codecs.Q8, codecs.Raw, codecs.Raw, 1},
		{"q4", []string{"experts.gate_up=nvfp4"}, nil, codecs.NVFP4, codecs.Q4, codecs.Raw, codecs.Raw, 1},
		{"q4", []string{"experts=q6", "experts.gate_up=q4"}, nil, codecs.Q4, codecs.Q6, codecs.Raw, codecs.Raw, 2},
		{"q6", []string{"experts.gate_up=q4", "experts.down=q5"}, nil, codecs.Q4, codecs.Q5, codecs.Raw, codecs.Raw, 2},
		// Spelling: case-insensitive names, bf16 for raw, comma-separated lists.
		{"Q4", []string{"ATTN=Q8"}, nil, codecs.Q4, codecs.Q4, codecs.Q8, codecs.Raw, 1},
		{"q4", []string{"experts=bf16"}, nil, codecs.Raw, codecs.Raw, codecs.Raw, codecs.Raw, 1},
		{"q4", []string{"attn=q8,vision=q8"}, nil, codecs.Q4, codecs.Q4, codecs.Q8, codecs.Q8, 2},
		{"q4", []string{"attn=q8, experts.down=q6", "vision=raw"}, nil, codecs.Q4, codecs.Q6, codecs.Q8, codecs.Raw, 3},
		{"q4", []string{"attn=q8,"}, ErrOverrideSyntax, 0, 0, 0, 0, 0},
		{"q4", []string{"attn=q8,attn=q4"}, ErrDuplicate, 0, 0, 0, 0, 0},
		// Conflicts, locked, unknown.
		{"q4", []string{"attn=q8", "attn=q4"}, ErrDuplicate, 0, 0, 0, 0, 0},
		{"q4", []string{"router=q8"}, ErrLocked, 0, 0, 0, 0, 0},
		{"q4", []string{"norms=q8"}, ErrLocked, 0, 0, 0, 0, 0},
		{"q4", []string{"bogus=q8"}, ErrTarget, 0, 0, 0, 0, 0},
		{"q4", []string{"attn=q9"}, codecs.ErrUnknownFormat, 0, 0, 0, 0, 0},
		{"q3", nil, ErrProfile, 0, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		p, err := NewPolicy(tt.profile, tt.sets)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("NewPolicy(%s, %v) = %v; want %v", tt.profile, tt.sets, err, tt.err)
			} else if !strings.HasPrefix(err.Error(), "layout: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewPolicy(%s, %v): %v", tt.profile, tt.sets, err)
			continue
		}
		got := [4]codecs.Format{p.Format(Experts, RoleGateUp), p.Format(Experts, RoleDown), p.Format(Attn, RoleNone), p.Format(Vision, RoleNone)}
		want := [4]codecs.Format{tt.gateUp, tt.down, tt.attn, tt.vision}
		if got != want || len(p.Overrides) != tt.overrides {
			t.Errorf("NewPolicy(%s, %v) resolves %v with %d overrides; want %v, %d", tt.profile, tt.sets, got, len(p.Overrides), want, tt.overrides)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%v): %v", p, err)
		}
	}
}

func TestNewPolicyCanonicalOrderAndAllErrors(t *testing.T) {
	a := mustPolicy(t, "q4", "vision=q8", "attn=q8", "experts=q6")
	b := mustPolicy(t, "q4", "experts=q6", "vision=q8", "attn=q8")
	if len(a.Overrides) != 3 || a.Overrides[0].Target != "experts" || a.Overrides[1].Target != "attn" || a.Overrides[2].Target != "vision" {
		t.Fatalf("overrides not canonical: %v", a.Overrides)
	}
	for i := range a.Overrides {
		if a.Overrides[i] != b.Overrides[i] {
			t.Fatalf("order depends on input: %v vs %v", a.Overrides, b.Overrides)
		}
	}
	_, err := NewPolicy("q4", []string{"embed=q8", "foo=q4", "attn=q0"})
	if !errors.Is(err, ErrLocked) || !errors.Is(err, ErrTarget) || !errors.Is(err, codecs.ErrUnknownFormat) {
		t.Errorf("not every error reported: %v", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tt := range []struct {
		p   Policy
		err error
	}{
		{Policy{Profile: "q4"}, nil},
		{Policy{Profile: "zz"}, ErrProfile},
		{Policy{Profile: "q4", Overrides: []Override{{"norm", codecs.Q8}}}, ErrLocked},
		{Policy{Profile: "q4", Overrides: []Override{{"nope", codecs.Q8}}}, ErrTarget},
		{Policy{Profile: "q4", Overrides: []Override{{"attn", codecs.FormatInvalid}}}, codecs.ErrUnknownFormat},
		{Policy{Profile: "q4", Overrides: []Override{{"attn", codecs.Q8}, {"attn", codecs.Q4}}}, ErrDuplicate},
		{Policy{Profile: "q4", Overrides: []Override{{"experts.down", codecs.Q8}}}, nil},
		{Policy{Profile: "Q4"}, ErrProfile}, // a manifest's profile is its exact name
	} {
		if err := tt.p.Validate(); !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("Validate(%v) = %v; want %v", tt.p, err, tt.err)
		}
	}
}
