package enginepack

import (
	"fmt"
	"slices"
	"strings"
)

// Tensor kinds, spelled as the manifest spells them.
const (
	KindRaw    = "raw"
	KindQ4     = "q4_block"
	KindQ6     = "q6_block"
	KindQ8     = "q8_row"
	KindNVFP4  = "nvfp4_block"
	groupAff   = 32 // q4_block / q6_block group along K
	groupNVFP4 = 16 // nvfp4_block micro-block along K
)

// Profiles the engine knows. q5 classifies exactly like q4 (experts become
// q4_block); nvfp4_experts is q4's classification with nvfp4_block experts.
var profiles = []string{"q4", "q5", "q6", "nvfp4", "nvfp4_experts"}

// Class names of the engine's `quantize --set` knobs.
const (
	ClassExpertsGateUp = "experts.gate_up"
	ClassExpertsDown   = "experts.down"
	ClassAttn          = "attn"
	ClassDense         = "dense"
	ClassVision        = "vision"
	ClassSC            = "sc"
)

// shortKinds maps the CLI's short format names to manifest kinds.
var shortKinds = map[string]string{
	"raw": KindRaw, "q4": KindQ4, "q6": KindQ6, "q8": KindQ8, "nvfp4": KindNVFP4,
}

// ParseKind accepts a manifest kind ("q4_block") or the CLI's short name
// ("q4") and returns the manifest kind.
func ParseKind(s string) (string, error) {
	if k, ok := shortKinds[s]; ok {
		return k, nil
	}
	switch s {
	case KindQ4, KindQ6, KindQ8, KindNVFP4:
		return s, nil
	}
	return "", fmt.Errorf("enginepack: unknown tensor kind %q", s)
}

// ParseProfile checks that p is one of the engine's profiles.
func ParseProfile(p string) (string, error) {
	if !slices.Contains(profiles, p) {
		return "", fmt.Errorf("enginepack: unknown profile %q (want one of %v)", p, profiles)
	}
	return p, nil
}

// SupportedKinds lists the kinds the engine's CLI accepts for a class (the
// engine's writer itself does not check this; its `quantize` command does).
func SupportedKinds(class string) []string {
	switch class {
	case ClassExpertsGateUp, ClassExpertsDown:
		return []string{KindQ4, KindQ6, KindNVFP4}
	case ClassAttn, ClassDense, ClassSC:
		return []string{KindRaw, KindQ8, KindQ4, KindNVFP4}
	case ClassVision:
		return []string{KindRaw, KindQ4, KindQ6, KindQ8, KindNVFP4}
	}
	return nil
}

// ParseOverrides validates a class→kind map (class names as ClassOf returns
// them; kinds as ParseKind accepts them) and returns it with manifest kinds.
// Locked and unknown classes are errors; so is "experts", which the caller
// expands to both expert classes. Like the engine's writer it does not apply
// SupportedKinds; CheckCLIOverrides does.
func ParseOverrides(in map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for class, kind := range in {
		if SupportedKinds(class) == nil {
			return nil, fmt.Errorf("enginepack: override class %q: %s", class, classRefusal(class))
		}
		k, err := ParseKind(kind)
		if err != nil {
			return nil, fmt.Errorf("enginepack: override class %q: %w", class, err)
		}
		out[class] = k
	}
	return out, nil
}

func classRefusal(class string) string {
	switch class {
	case "embed", "embed_tokens", "router", "norms", "norm", "scalars", "scalar", "layer_scalar":
		return "locked (always raw)"
	case "experts":
		return "expand it to experts.gate_up and experts.down"
	}
	return "unknown class"
}

// CheckCLIOverrides applies the engine CLI's extra rules to parsed
// overrides: each kind must be supported for its class, and the two expert
// classes, when both are set, must agree.
func CheckCLIOverrides(o map[string]string) error {
	for class, kind := range o {
		if !slices.Contains(SupportedKinds(class), kind) {
			return fmt.Errorf("enginepack: override %s=%s: unsupported for the class (supported: %v)",
				class, kind, SupportedKinds(class))
		}
	}
	gu, okGU := o[ClassExpertsGateUp]
	dn, okDn := o[ClassExpertsDown]
	if okGU && okDn && gu != dn {
		return fmt.Errorf("enginepack: overrides experts.gate_up=%s and experts.down=%s differ", gu, dn)
	}
	return nil
}

// IsExpert reports whether a tensor belongs to the expert region at the end
// of the blob: a ".experts." name of rank 3.
func IsExpert(name string, shape []int64) bool {
	return strings.Contains(name, ".experts.") && len(shape) == 3
}

// Classify is the engine's fixed profile mapping from name and shape to a
// kind. It expects a valid profile.
func Classify(name string, shape []int64, profile string) string {
	switch {
	case strings.Contains(name, ".router."),
		strings.Contains(name, "_norm"), strings.HasSuffix(name, ".scale"),
		strings.Contains(name, "layer_scalar"),
		strings.Contains(name, "embed_tokens"):
		return KindRaw
	case strings.Contains(name, "self_conditioning"):
		return KindQ8
	case len(shape) == 2 && isGemmLinear(name):
		if profile == "nvfp4" {
			return KindNVFP4
		}
		return KindRaw
	case IsExpert(name, shape):
		return expertKind(profile)
	}
	return KindRaw
}

func expertKind(profile string) string {
	switch profile {
	case "q6":
		return KindQ6
	case "nvfp4", "nvfp4_experts":
		return KindNVFP4
	}
	return KindQ4
}

// isGemmLinear: decoder-style attention projections and dense MLP weights.
// It also matches vision-tower linears, whose names carry the same parts.
func isGemmLinear(name string) bool {
	return isAttnLinear(name) || isDenseLinear(name)
}

func isAttnLinear(name string) bool {
	if !strings.HasSuffix(name, ".weight") || !strings.Contains(name, ".self_attn.") {
		return false
	}
	return containsAny(name, ".q_proj.", ".k_proj.", ".v_proj.", ".o_proj.")
}

func isDenseLinear(name string) bool {
	return strings.HasSuffix(name, ".weight") &&
		containsAny(name, ".mlp.gate_proj.", ".mlp.up_proj.", ".mlp.down_proj.")
}

func isVisionLinear(name string) bool {
	if name == "model.encoder.embed_vision.embedding_projection.weight" {
		return true
	}
	return strings.HasSuffix(name, ".linear.weight") && containsAny(name, ".self_attn.", ".mlp.")
}

func isLocked(name string) bool {
	return containsAny(name, ".router.", "_norm", "layernorm", "layer_scalar", "embed_tokens") ||
		strings.HasSuffix(name, ".scale")
}

func containsAny(s string, parts ...string) bool {
	for _, p := range parts {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// ClassOf is the engine's knob class of a tensor, or "" when no knob reaches
// it (locked tensors and everything else).
func ClassOf(name string, shape []int64) string {
	switch {
	case isLocked(name):
		return ""
	case IsExpert(name, shape):
		return expertClass(name)
	case len(shape) == 2 && strings.Contains(name, "self_conditioning") && strings.HasSuffix(name, ".weight"):
		return ClassSC
	case strings.Contains(name, ".vision_tower.") || strings.Contains(name, "embed_vision"):
		if len(shape) == 2 && isVisionLinear(name) {
			return ClassVision
		}
		return ""
	case len(shape) == 2 && isAttnLinear(name):
		return ClassAttn
	case len(shape) == 2 && isDenseLinear(name):
		return ClassDense
	}
	return ""
}

func expertClass(name string) string {
	switch {
	case strings.HasSuffix(name, "gate_up_proj"):
		return ClassExpertsGateUp
	case strings.HasSuffix(name, "down_proj"):
		return ClassExpertsDown
	}
	return ""
}

// ClassifyCustom is Classify with class overrides (manifest kinds, as
// ParseOverrides returns them) layered on top.
func ClassifyCustom(name string, shape []int64, profile string, overrides map[string]string) string {
	if class := ClassOf(name, shape); class != "" {
		if kind, ok := overrides[class]; ok {
			return kind
		}
	}
	return Classify(name, shape, profile)
}

// ValidateFormatDims is the engine's per-tensor check, made before anything
// is written: q4/q6 need the last dimension to be a multiple of 32, nvfp4 a
// multiple of 16, q8 a rank-2 tensor. Only the last dimension is checked.
func ValidateFormatDims(name string, shape []int64, kind string) error {
	switch kind {
	case KindRaw:
		return nil
	case KindQ8:
		if len(shape) != 2 {
			return fmt.Errorf("enginepack: %s: q8_row needs a rank-2 tensor, got shape %v", name, shape)
		}
		return nil
	case KindQ4, KindQ6, KindNVFP4:
		return checkLastDim(name, shape, kind)
	}
	return fmt.Errorf("enginepack: %s: unknown kind %q", name, kind)
}

func checkLastDim(name string, shape []int64, kind string) error {
	if len(shape) == 0 {
		return fmt.Errorf("enginepack: %s: %s needs a non-scalar tensor", name, kind)
	}
	group := int64(groupAff)
	if kind == KindNVFP4 {
		group = groupNVFP4
	}
	if k := shape[len(shape)-1]; k%group != 0 {
		return fmt.Errorf("enginepack: %s: %s needs the last dimension (%d) to be a multiple of %d", name, kind, k, group)
	}
	return nil
}

// BaseVersion is the manifest version a profile implies on its own.
func BaseVersion(profile string) uint32 {
	if profile == "nvfp4" || profile == "nvfp4_experts" {
		return 2
	}
	return 1
}

// Version is the engine writer's rule: custom classes give 4, else a layered
// pack gives 3, else any nvfp4_block tensor lifts the profile's version to
// at least 2.
func Version(profile string, custom, layered, hasNVFP4 bool) uint32 {
	switch {
	case custom:
		return 4
	case layered:
		return 3
	case hasNVFP4:
		return max(BaseVersion(profile), 2)
	}
	return BaseVersion(profile)
}
