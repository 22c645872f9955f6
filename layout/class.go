package layout

import "fmt"

// Class is the quantization class of a tensor. The numeric values are part
// of no file format (manifests store the text form) but are fixed so that
// tables indexed by Class stay stable.
type Class uint8

const (
	ClassInvalid Class = 0
	Experts      Class = 1  // MoE expert stacks (3-D)
	Attn         Class = 2  // self_attn q/k/v/o projections
	Dense        Class = 3  // the dense ("shared") MLP
	SC           Class = 4  // the self-conditioning MLP
	Vision       Class = 5  // vision tower linears and the vision embedding projection
	Embed        Class = 6  // token embedding (tied to lm_head): locked
	Router       Class = 7  // router projection and scales: locked
	Norm         Class = 8  // every norm weight, vision 1-D vectors: locked
	LayerScalar  Class = 9  // per-layer scalar buffers: locked
	VisionOther  Class = 10 // the other vision matrices (patch embedder, position table): locked
)

var classNames = [...]string{
	ClassInvalid: "invalid",
	Experts:      "experts",
	Attn:         "attn",
	Dense:        "dense",
	SC:           "sc",
	Vision:       "vision",
	Embed:        "embed",
	Router:       "router",
	Norm:         "norm",
	LayerScalar:  "layer_scalar",
	VisionOther:  "vision_other",
}

// Classes lists every valid class in numeric order.
func Classes() []Class {
	return []Class{Experts, Attn, Dense, SC, Vision, Embed, Router, Norm, LayerScalar, VisionOther}
}

// Valid reports whether c is a known class.
func (c Class) Valid() bool { return c >= Experts && c <= VisionOther }

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Locked reports whether the class is never quantized and cannot be the
// target of a --set override: embed, router, norm, layer_scalar and
// vision_other.
func (c Class) Locked() bool {
	switch c {
	case Embed, Router, Norm, LayerScalar, VisionOther:
		return true
	}
	return false
}

// ParseClass parses the text form of a class.
func ParseClass(s string) (Class, error) {
	for _, c := range Classes() {
		if classNames[c] == s {
			return c, nil
		}
	}
	return ClassInvalid, fmt.Errorf("layout: unknown class %q (known: experts, attn, dense, sc, vision, embed, router, norm, layer_scalar, vision_other)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (c Class) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("layout: invalid class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Role distinguishes the two expert stacks; every other class has RoleNone.
type Role uint8

const (
	RoleNone   Role = 0
	RoleGateUp Role = 1 // experts.gate_up_proj [E, 2F, H]
	RoleDown   Role = 2 // experts.down_proj [E, H, F]
	// RoleProjection marks the vision embedding projection: class vision (so
	// --set vision reaches it) but raw in every profile, as in the engine.
	RoleProjection Role = 3
)

var roleNames = [...]string{RoleNone: "none", RoleGateUp: "gate_up", RoleDown: "down", RoleProjection: "projection"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole parses the text form of a role ("none", "gate_up", "down").
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return Role(r), nil
		}
	}
	return RoleNone, fmt.Errorf("layout: unknown role %q (known: none, gate_up, down)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (r Role) MarshalText() ([]byte, error) {
	if int(r) >= len(roleNames) {
		return nil, fmt.Errorf("layout: invalid role %d", uint8(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
