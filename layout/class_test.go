package layout

import (
	"encoding/json"
	"testing"
)

func TestClassText(t *testing.T) {
	want := map[Class]string{Experts: "experts", Attn: "attn", Dense: "dense", SC: "sc", Vision: "vision",
		Embed: "embed", Router: "router", Norm: "norm", LayerScalar: "layer_scalar", VisionOther: "vision_other"}
	if len(Classes()) != len(want) {
		t.Fatalf("Classes() = %v", Classes())
	}
	for _, c := range Classes() {
		if c.String() != want[c] {
			t.Errorf("%d.String() = %q, want %q", c, c.String(), want[c])
		}
		b, err := c.MarshalText()
		if err != nil || string(b) != want[c] {
			t.Errorf("MarshalText(%v) = %q, %v", c, b, err)
		}
		var d Class
		if err := d.UnmarshalText(b); err != nil || d != c {
			t.Errorf("UnmarshalText(%q) = %v, %v", b, d, err)
		}
		if p, err := ParseClass(want[c]); err != nil || p != c {
			t.Errorf("ParseClass(%q) = %v, %v", want[c], p, err)
		}
	}
	if _, err := ClassInvalid.MarshalText(); err == nil {
		t.Error("MarshalText(ClassInvalid) succeeded")
	}
	for _, s := range []string{"", "invalid", "Experts", "norms", "expert"} {
		if _, err := ParseClass(s); err == nil {
			t.Errorf("ParseClass(%q) succeeded", s)
		}
	}
	if Class(42).String() != "Class(42)" {
		t.Errorf("Class(42).String() = %q", Class(42).String())
	}
	// JSON round trip through the text form.
	b, err := json.Marshal(map[string]Class{"c": LayerScalar})
	if err != nil || string(b) != `{"c":"layer_scalar"}` {
		t.Fatalf("json = %s, %v", b, err)
	}
}

func TestClassLocked(t *testing.T) {
	locked := map[Class]bool{Embed: true, Router: true, Norm: true, LayerScalar: true, VisionOther: true}
	for _, c := range append(Classes(), ClassInvalid) {
		if c.Locked() != locked[c] {
			t.Errorf("%v.Locked() = %v", c, c.Locked())
		}
	}
}

func TestRoleText(t *testing.T) {
	for r, s := range map[Role]string{RoleNone: "none", RoleGateUp: "gate_up", RoleDown: "down", RoleProjection: "projection"} {
		b, err := r.MarshalText()
		if err != nil || string(b) != s {
			t.Errorf("MarshalText(%d) = %q, %v", r, b, err)
		}
		var d Role
		if err := d.UnmarshalText([]byte(s)); err != nil || d != r {
			t.Errorf("UnmarshalText(%q) = %v, %v", s, d, err)
		}
	}
	if _, err := ParseRole("up"); err == nil {
		t.Error(`ParseRole("up") succeeded`)
	}
	if _, err := Role(4).MarshalText(); err == nil {
		t.Error("MarshalText(Role(4)) succeeded")
	}
}
