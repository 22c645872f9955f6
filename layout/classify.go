package layout

import (
	"fmt"
	"strings"
)

// Name prefixes of the checkpoint's module trees (MODEL_SPEC §2).
const (
	DecoderPrefix     = "model.decoder."                // the stored text weights
	EncoderTextPrefix = "model.encoder.language_model." // tied copies (and the untied layer_scalar buffers)
	VisionTowerPrefix = "model.encoder.vision_tower."
	EmbedVisionPrefix = "model.encoder.embed_vision."
	LMHeadName        = "lm_head.weight" // tied to the embedding; stored only by an untied checkpoint
)

type classRole struct {
	class Class
	role  Role
}

// textTop are the text names directly under a language-model prefix. The
// self-conditioning block exists only in the decoder.
var textTop = map[string]classRole{
	"embed_tokens.weight": {Embed, RoleNone},
	"norm.weight":         {Norm, RoleNone},
}

var decoderOnlyTop = map[string]classRole{
	"self_conditioning.pre_norm.weight":  {Norm, RoleNone},
	"self_conditioning.gate_proj.weight": {SC, RoleNone},
	"self_conditioning.up_proj.weight":   {SC, RoleNone},
	"self_conditioning.down_proj.weight": {SC, RoleNone},
}

// layerSuffix are the names under layers.N.
var layerSuffix = map[string]classRole{
	"input_layernorm.weight":              {Norm, RoleNone},
	"post_attention_layernorm.weight":     {Norm, RoleNone},
	"pre_feedforward_layernorm.weight":    {Norm, RoleNone},
	"post_feedforward_layernorm.weight":   {Norm, RoleNone},
	"post_feedforward_layernorm_1.weight": {Norm, RoleNone},
	"pre_feedforward_layernorm_2.weight":  {Norm, RoleNone},
	"post_feedforward_layernorm_2.weight": {Norm, RoleNone},
	"layer_scalar":                        {LayerScalar, RoleNone},
	"self_attn.q_proj.weight":             {Attn, RoleNone},
	"self_attn.k_proj.weight":             {Attn, RoleNone},
	"self_attn.v_proj.weight":             {Attn, RoleNone},
	"self_attn.o_proj.weight":             {Attn, RoleNone},
	"self_attn.q_norm.weight":             {Norm, RoleNone},
	"self_attn.k_norm.weight":             {Norm, RoleNone},
	"mlp.gate_proj.weight":                {Dense, RoleNone},
	"mlp.up_proj.weight":                  {Dense, RoleNone},
	"mlp.down_proj.weight":                {Dense, RoleNone},
	"router.proj.weight":                  {Router, RoleNone},
	"router.scale":                        {Router, RoleNone},
	"router.per_expert_scale":             {Router, RoleNone},
	"experts.gate_up_proj":                {Experts, RoleGateUp},
	"experts.down_proj":                   {Experts, RoleDown},
}

// maxLayerDigits bounds the layer index in a name (MaxLayers is 1024).
const maxLayerDigits = 4

// Classify maps a checkpoint tensor name (and its rank) to its class and,
// for experts, its role. Names are matched on their exact structure:
//
//   - lm_head.weight and <lm>.embed_tokens.weight → embed
//   - every norm weight → norm; <lm>.layers.N.layer_scalar → layer_scalar
//   - <lm>.layers.N.router.{proj.weight,scale,per_expert_scale} → router
//   - <lm>.layers.N.experts.gate_up_proj / down_proj → experts, gate_up / down
//   - <lm>.layers.N.self_attn.{q,k,v,o}_proj.weight → attn
//   - <lm>.layers.N.mlp.{gate,up,down}_proj.weight → dense
//   - model.decoder.self_conditioning.{gate,up,down}_proj.weight → sc
//   - under model.encoder.vision_tower.: rank-2 names ending in .linear.weight
//     under a .self_attn. or .mlp. module → vision; model.encoder.embed_vision.
//     embedding_projection.weight (rank 2) → vision, role projection; any
//     other vision name → vision_other when rank ≥ 2, norm when rank < 2
//     (the engine's tensor_class makes exactly the first two overridable)
//
// where <lm> is model.decoder or model.encoder.language_model (a copy of a
// decoder weight has the class of its twin). Any other name is an error
// wrapping ErrUnknownTensor.
func Classify(name string, rank int) (Class, Role, error) {
	if name == LMHeadName {
		return Embed, RoleNone, nil
	}
	if rest, ok := cutPrefix(name, VisionTowerPrefix, EmbedVisionPrefix); ok {
		if validPath(rest) {
			return classifyVision(name, rank), roleOfVision(name), nil
		}
	} else if rest, ok := strings.CutPrefix(name, DecoderPrefix); ok {
		if cr, ok := classifyText(rest, true); ok {
			return cr.class, cr.role, nil
		}
	} else if rest, ok := strings.CutPrefix(name, EncoderTextPrefix); ok {
		if cr, ok := classifyText(rest, false); ok {
			return cr.class, cr.role, nil
		}
	}
	return ClassInvalid, RoleNone, fmt.Errorf("%w: %q", ErrUnknownTensor, name)
}

// VisionProjection is the vision embedder's projection matrix.
const VisionProjection = EmbedVisionPrefix + "embedding_projection.weight"

// classifyVision classifies a name under the vision prefixes.
func classifyVision(name string, rank int) Class {
	switch {
	case rank == 2 && (name == VisionProjection || isVisionLinear(name)):
		return Vision
	case rank >= 2:
		return VisionOther
	}
	return Norm
}

// isVisionLinear: a vision tower attention or MLP linear.
func isVisionLinear(name string) bool {
	return strings.HasPrefix(name, VisionTowerPrefix) && strings.HasSuffix(name, ".linear.weight") &&
		(strings.Contains(name, ".self_attn.") || strings.Contains(name, ".mlp."))
}

func roleOfVision(name string) Role {
	if name == VisionProjection {
		return RoleProjection
	}
	return RoleNone
}

// IsVision reports whether name lies under the vision tower or the vision
// embedder (whatever follows the prefix).
func IsVision(name string) bool {
	rest, ok := cutPrefix(name, VisionTowerPrefix, EmbedVisionPrefix)
	return ok && validPath(rest)
}

// DecoderTwin maps a known text name under model.encoder.language_model. to
// the decoder name it is tied to. Note that layers.N.layer_scalar buffers are
// not tied: a checkpoint stores both, and the encoder's is used by the
// encoder pass.
func DecoderTwin(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, EncoderTextPrefix)
	if !ok {
		return "", false
	}
	if _, ok := classifyText(rest, false); !ok {
		return "", false
	}
	return DecoderPrefix + rest, true
}

func classifyText(rest string, decoder bool) (classRole, bool) {
	if cr, ok := textTop[rest]; ok {
		return cr, true
	}
	if decoder {
		if cr, ok := decoderOnlyTop[rest]; ok {
			return cr, true
		}
	}
	after, ok := strings.CutPrefix(rest, "layers.")
	if !ok {
		return classRole{}, false
	}
	idx, suffix, ok := strings.Cut(after, ".")
	if !ok || !layerIndex(idx) {
		return classRole{}, false
	}
	cr, ok := layerSuffix[suffix]
	return cr, ok
}

// layerIndex reports whether s is a canonical decimal layer index: digits,
// no leading zero (except "0" itself), at most maxLayerDigits long.
func layerIndex(s string) bool {
	if s == "" || len(s) > maxLayerDigits || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func cutPrefix(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return "", false
}

// validPath reports whether s is a non-empty dotted path with no empty component.
func validPath(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
	}
	return true
}
