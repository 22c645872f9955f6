package layout

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Layer types of text_config.layer_types.
const (
	SlidingAttention = "sliding_attention"
	FullAttention    = "full_attention"
)

// Bounds on config values, so a hostile config.json cannot make later code
// allocate absurdly. The 26B checkpoint is far inside every one.
const (
	MaxHidden       = 1 << 20
	MaxLayers       = 1024
	MaxVocab        = 1 << 24
	MaxHeads        = 1024
	MaxHeadDim      = 4096
	MaxIntermediate = 1 << 20
	MaxExperts      = 4096
	MaxWindow       = 1 << 24
	MaxPositions    = 1 << 26
	MaxCanvas       = 1 << 16
	maxTokenID      = 1 << 24
	maxEOSTokens    = 64
	maxRopeTheta    = 1e12
	maxSoftcap      = 1e6
)

// Defaults that apply when config.json omits a key (transformers 5.17).
const (
	DefaultCanvasLength   = 256
	DefaultGlobalHeadDim  = 512
	DefaultSoftcap        = 30.0
	DefaultRMSNormEps     = 1e-6
	DefaultSlidingWindow  = 512
	DefaultMaxPositions   = 131072
	DefaultActivation     = "gelu_pytorch_tanh"
	defaultSlidingPattern = 6 // every 6th layer is full when layer_types is absent
)

// LayerGeom is the attention geometry of one layer. Full-attention layers
// always share K and V (they have no v_proj).
type LayerGeom struct {
	Type    string // SlidingAttention or FullAttention
	HeadDim int
	KVHeads int
}

// HasVProj reports whether the layer has its own v_proj (sliding layers only).
func (g LayerGeom) HasVProj() bool { return g.Type == SlidingAttention }

// RopeParams are the rotary parameters of one layer type.
type RopeParams struct {
	Type                string  // rope_type: "default", "proportional", ...
	Theta               float64 // rope_theta
	PartialRotaryFactor float64 // 1.0 when absent
}

// TextConfig is text_config, validated and with every default applied.
type TextConfig struct {
	HiddenSize          int
	NumLayers           int
	VocabSize           int
	NumHeads            int
	HeadDim             int // of sliding layers; see Layers for each layer's
	NumKVHeads          int // of sliding layers; see Layers for each layer's
	IntermediateSize    int
	NumExperts          int
	TopK                int
	MoEIntermediateSize int
	SlidingWindow       int // after the halving quirk of use_bidirectional_attention == "all"
	RMSNormEps          float64
	FinalLogitSoftcap   float64
	HiddenActivation    string
	LayerTypes          []string
	Layers              []LayerGeom
	Rope                map[string]RopeParams // keyed by layer type
	// UseBidirectionalAttention is "" (null or absent), "vision" or "all".
	UseBidirectionalAttention string
	PadTokenID                int
	BOSTokenID                int
	EOSTokenIDs               []int
	TieWordEmbeddings         bool
	MaxPositionEmbeddings     int
}

// Config is the part of a DiffusionGemma config.json that dgq uses.
type Config struct {
	ModelType         string
	CanvasLength      int
	TieWordEmbeddings bool // ties lm_head and the encoder text weights to the decoder
	Text              TextConfig
	HasVision         bool
}

// ParseConfig parses and validates a DiffusionGemma config.json. It reads
// both forms of the full-attention geometry: global_head_dim and
// num_global_key_value_heads (the hub form), or per_layer_config keyed by
// layer index (the form transformers 5.17 writes); with neither, full layers
// get head_dim 512 and num_key_value_heads. A missing, mistyped or
// out-of-range key is an error wrapping ErrConfig that names it.
func ParseConfig(data []byte) (*Config, error) {
	var p configParser
	c := p.parse(data)
	if p.err != nil {
		return nil, p.err
	}
	return c, nil
}

// configParser records the first error; every method is a no-op after it.
type configParser struct{ err error }

type jsonObject struct {
	path string
	m    map[string]json.RawMessage
}

func (p *configParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
}

func (o jsonObject) name(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// get returns the raw value of key, treating null as absent.
func (o jsonObject) get(key string) (json.RawMessage, bool) {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

func (p *configParser) object(path string, raw []byte) jsonObject {
	o := jsonObject{path: path}
	if p.err != nil {
		return o
	}
	trimmed := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(trimmed, "{") {
		if path == "" {
			p.fail("not a JSON object")
		} else {
			p.fail("%s is not an object", path)
		}
		return o
	}
	if err := json.Unmarshal(raw, &o.m); err != nil {
		if path == "" {
			p.fail("invalid JSON: %v", err)
		} else {
			p.fail("%s: invalid JSON: %v", path, err)
		}
	}
	return o
}

func (p *configParser) sub(o jsonObject, key string) (jsonObject, bool) {
	raw, ok := o.get(key)
	if !ok || p.err != nil {
		return jsonObject{path: o.name(key)}, false
	}
	return p.object(o.name(key), raw), p.err == nil
}

// intValue parses an integral JSON number (64 and 64.0 alike).
func intValue(raw json.RawMessage) (int64, bool) {
	s := strings.TrimSpace(string(raw))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func (p *configParser) intIn(o jsonObject, key string, def *int, lo, hi int) int {
	if p.err != nil {
		return 0
	}
	raw, ok := o.get(key)
	if !ok {
		if def == nil {
			p.fail("%s missing", o.name(key))
			return 0
		}
		return *def
	}
	v, ok := intValue(raw)
	if !ok {
		p.fail("%s: want an integer, got %.40s", o.name(key), raw)
		return 0
	}
	if v < int64(lo) || v > int64(hi) {
		p.fail("%s = %d out of range [%d, %d]", o.name(key), v, lo, hi)
		return 0
	}
	return int(v)
}

func (p *configParser) floatIn(o jsonObject, key string, def *float64, lo, hi float64, loOpen bool) float64 {
	if p.err != nil {
		return 0
	}
	raw, ok := o.get(key)
	if !ok {
		if def == nil {
			p.fail("%s missing", o.name(key))
			return 0
		}
		return *def
	}
	s := strings.TrimSpace(string(raw))
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		p.fail("%s: want a number, got %.40s", o.name(key), raw)
		return 0
	}
	if math.IsNaN(v) || v < lo || v > hi || (loOpen && v == lo) {
		open := "["
		if loOpen {
			open = "("
		}
		p.fail("%s = %g out of range %s%g, %g]", o.name(key), v, open, lo, hi)
		return 0
	}
	return v
}

func (p *configParser) str(o jsonObject, key string, def *string) string {
	if p.err != nil {
		return ""
	}
	raw, ok := o.get(key)
	if !ok {
		if def == nil {
			p.fail("%s missing", o.name(key))
			return ""
		}
		return *def
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail("%s: want a string, got %.40s", o.name(key), raw)
	}
	return s
}

func (p *configParser) boolean(o jsonObject, key string, def bool) bool {
	if p.err != nil {
		return false
	}
	raw, ok := o.get(key)
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		p.fail("%s: want true or false, got %.40s", o.name(key), raw)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

func (p *configParser) parse(data []byte) *Config {
	top := p.object("", data)
	c := &Config{}
	c.ModelType = p.str(top, "model_type", nil)
	if p.err == nil && c.ModelType != "diffusion_gemma" {
		p.fail("model_type %q, want diffusion_gemma", c.ModelType)
	}
	c.CanvasLength = p.intIn(top, "canvas_length", ptr(DefaultCanvasLength), 1, MaxCanvas)
	c.TieWordEmbeddings = p.boolean(top, "tie_word_embeddings", true)
	if _, ok := top.get("vision_config"); ok {
		_, c.HasVision = p.sub(top, "vision_config")
	}
	text, ok := p.sub(top, "text_config")
	if !ok {
		p.fail("text_config missing")
		return nil
	}
	p.parseText(&c.Text, text, top)
	return c
}

func (p *configParser) parseText(t *TextConfig, o, top jsonObject) {
	if mt := p.str(o, "model_type", ptr("diffusion_gemma_text")); p.err == nil && mt != "diffusion_gemma_text" {
		p.fail("%s %q, want diffusion_gemma_text", o.name("model_type"), mt)
	}
	t.HiddenSize = p.intIn(o, "hidden_size", nil, 1, MaxHidden)
	t.NumLayers = p.intIn(o, "num_hidden_layers", nil, 1, MaxLayers)
	t.VocabSize = p.intIn(o, "vocab_size", nil, 1, MaxVocab)
	t.NumHeads = p.intIn(o, "num_attention_heads", nil, 1, MaxHeads)
	t.HeadDim = p.intIn(o, "head_dim", nil, 1, MaxHeadDim)
	t.NumKVHeads = p.intIn(o, "num_key_value_heads", nil, 1, MaxHeads)
	t.IntermediateSize = p.intIn(o, "intermediate_size", nil, 1, MaxIntermediate)
	t.NumExperts = p.intIn(o, "num_experts", nil, 1, MaxExperts)
	t.TopK = p.intIn(o, "top_k_experts", nil, 1, max(t.NumExperts, 1))
	t.MoEIntermediateSize = p.intIn(o, "moe_intermediate_size", nil, 1, MaxIntermediate)
	t.RMSNormEps = p.floatIn(o, "rms_norm_eps", ptr(DefaultRMSNormEps), 0, 1, true)
	if raw, ok := o.m["final_logit_softcapping"]; ok && isNull(raw) && p.err == nil {
		p.fail("%s is null, want a positive number (30.0)", o.name("final_logit_softcapping"))
	}
	t.FinalLogitSoftcap = p.floatIn(o, "final_logit_softcapping", ptr(DefaultSoftcap), 0, maxSoftcap, true)
	t.HiddenActivation = p.str(o, "hidden_activation", ptr(DefaultActivation))
	if p.err == nil && t.HiddenActivation == "" {
		p.fail("%s is empty", o.name("hidden_activation"))
	}
	t.UseBidirectionalAttention = p.str(o, "use_bidirectional_attention", ptr(""))
	switch t.UseBidirectionalAttention {
	case "", "vision", "all":
	default:
		p.fail("%s %q, want null, \"vision\" or \"all\"", o.name("use_bidirectional_attention"), t.UseBidirectionalAttention)
	}
	t.SlidingWindow = p.intIn(o, "sliding_window", ptr(DefaultSlidingWindow), 1, MaxWindow)
	if t.UseBidirectionalAttention == "all" {
		t.SlidingWindow = t.SlidingWindow/2 + 1 // transformers' flash-attention half-window quirk
	}
	t.MaxPositionEmbeddings = p.intIn(o, "max_position_embeddings", ptr(DefaultMaxPositions), 1, MaxPositions)
	t.TieWordEmbeddings = p.boolean(o, "tie_word_embeddings", true)
	if p.err != nil {
		return
	}
	if t.NumHeads%t.NumKVHeads != 0 {
		p.fail("%s = %d is not divisible by %s = %d", o.name("num_attention_heads"), t.NumHeads,
			o.name("num_key_value_heads"), t.NumKVHeads)
		return
	}
	t.PadTokenID = p.intIn(o, "pad_token_id", ptr(0), 0, t.VocabSize-1)
	t.BOSTokenID = p.intIn(o, "bos_token_id", ptr(2), 0, t.VocabSize-1)
	t.EOSTokenIDs = p.eos(o, top)
	t.LayerTypes = p.layerTypes(o, t.NumLayers)
	t.Layers = p.layerGeoms(o, t)
	t.Rope = p.rope(o, t.LayerTypes)
}

// eos reads text_config.eos_token_id, falling back to the top-level key and
// then to [1]; each is an integer or a list of integers.
func (p *configParser) eos(o, top jsonObject) []int {
	src := o
	raw, ok := o.get("eos_token_id")
	if !ok {
		src = top
		if raw, ok = top.get("eos_token_id"); !ok {
			return []int{1}
		}
	}
	name := src.name("eos_token_id")
	var list []json.RawMessage
	if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
		if err := json.Unmarshal(raw, &list); err != nil {
			p.fail("%s: %v", name, err)
			return nil
		}
		if len(list) == 0 || len(list) > maxEOSTokens {
			p.fail("%s: want 1 to %d ids, got %d", name, maxEOSTokens, len(list))
			return nil
		}
	} else {
		list = []json.RawMessage{raw}
	}
	ids := make([]int, len(list))
	for i, r := range list {
		v, ok := intValue(r)
		if !ok || v < 0 || v >= maxTokenID {
			p.fail("%s: want token ids in [0, %d), got %.40s", name, maxTokenID, r)
			return nil
		}
		ids[i] = int(v)
	}
	return ids
}

// layerTypes reads layer_types or, when absent, builds transformers' default
// 5:1 pattern. As transformers does, the last layer is forced to full
// attention.
func (p *configParser) layerTypes(o jsonObject, n int) []string {
	if p.err != nil {
		return nil
	}
	types := make([]string, n)
	raw, ok := o.get("layer_types")
	if !ok {
		for i := range types {
			types[i] = SlidingAttention
			if (i+1)%defaultSlidingPattern == 0 {
				types[i] = FullAttention
			}
		}
	} else {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			p.fail("%s: want a list of layer types", o.name("layer_types"))
			return nil
		}
		if len(list) != n {
			p.fail("%s has %d entries, num_hidden_layers is %d", o.name("layer_types"), len(list), n)
			return nil
		}
		for i, r := range list {
			var s string
			if err := json.Unmarshal(r, &s); err != nil || (s != SlidingAttention && s != FullAttention) {
				p.fail("%s[%d] = %.40s, want %q or %q", o.name("layer_types"), i, r, SlidingAttention, FullAttention)
				return nil
			}
			types[i] = s
		}
	}
	types[n-1] = FullAttention
	return types
}

func (p *configParser) layerGeoms(o jsonObject, t *TextConfig) []LayerGeom {
	if p.err != nil {
		return nil
	}
	geoms := make([]LayerGeom, t.NumLayers)
	for i, typ := range t.LayerTypes {
		geoms[i] = LayerGeom{Type: typ, HeadDim: t.HeadDim, KVHeads: t.NumKVHeads}
	}
	if _, ok := o.get("per_layer_config"); ok {
		p.perLayerConfig(o, geoms)
	} else {
		hd := p.intIn(o, "global_head_dim", ptr(DefaultGlobalHeadDim), 1, MaxHeadDim)
		kv := p.intIn(o, "num_global_key_value_heads", ptr(t.NumKVHeads), 1, MaxHeads)
		for i := range geoms {
			if geoms[i].Type == FullAttention {
				geoms[i].HeadDim, geoms[i].KVHeads = hd, kv
			}
		}
	}
	for i, g := range geoms {
		if p.err != nil {
			return nil
		}
		switch {
		case g.HeadDim%2 != 0:
			p.fail("%s: layer %d (%s) head_dim %d is odd (rotary embedding needs it even)", o.path, i, g.Type, g.HeadDim)
		case t.NumHeads%g.KVHeads != 0:
			p.fail("%s: layer %d (%s) num_attention_heads %d is not divisible by %d KV heads", o.path, i, g.Type, t.NumHeads, g.KVHeads)
		}
	}
	return geoms
}

// perLayerConfig applies per_layer_config, an object keyed by layer index
// ("5" or zero-padded "05") holding head_dim and num_key_value_heads.
func (p *configParser) perLayerConfig(o jsonObject, geoms []LayerGeom) {
	plc, ok := p.sub(o, "per_layer_config")
	if !ok {
		return
	}
	seen := make(map[int]string, len(plc.m))
	for _, key := range slices.Sorted(maps.Keys(plc.m)) {
		if p.err != nil {
			return
		}
		idx, ok := intValue(json.RawMessage(key))
		if !ok || strings.ContainsAny(key, ".eE+- ") || idx < 0 || idx >= int64(len(geoms)) {
			p.fail("%s: key %q is not a layer index in [0, %d)", plc.path, key, len(geoms))
			return
		}
		if prev, dup := seen[int(idx)]; dup {
			p.fail("%s: keys %q and %q name the same layer", plc.path, prev, key)
			return
		}
		seen[int(idx)] = key
		entry, ok := p.sub(plc, key)
		if !ok {
			continue // null: no override
		}
		g := &geoms[idx]
		g.HeadDim = p.intIn(entry, "head_dim", ptr(g.HeadDim), 1, MaxHeadDim)
		g.KVHeads = p.intIn(entry, "num_key_value_heads", ptr(g.KVHeads), 1, MaxHeads)
	}
}

// rope reads rope_parameters, an object keyed by layer type; when absent,
// transformers' defaults apply.
func (p *configParser) rope(o jsonObject, types []string) map[string]RopeParams {
	if p.err != nil {
		return nil
	}
	out := map[string]RopeParams{
		SlidingAttention: {Type: "default", Theta: 10000, PartialRotaryFactor: 1},
		FullAttention:    {Type: "proportional", Theta: 1e6, PartialRotaryFactor: 0.25},
	}
	rp, ok := p.sub(o, "rope_parameters")
	if !ok {
		return out
	}
	for _, key := range slices.Sorted(maps.Keys(rp.m)) {
		if key != SlidingAttention && key != FullAttention {
			p.fail("%s: unknown key %q (want %s and %s entries)", rp.path, key, SlidingAttention, FullAttention)
			return nil
		}
	}
	for _, typ := range []string{SlidingAttention, FullAttention} {
		used := false
		for _, t := range types {
			used = used || t == typ
		}
		entry, ok := p.sub(rp, typ)
		if !ok {
			if used {
				p.fail("%s missing", rp.name(typ))
			}
			delete(out, typ)
			continue
		}
		out[typ] = RopeParams{
			Type:                p.str(entry, "rope_type", ptr("default")),
			Theta:               p.floatIn(entry, "rope_theta", nil, 0, maxRopeTheta, true),
			PartialRotaryFactor: p.floatIn(entry, "partial_rotary_factor", ptr(1.0), 0, 1, true),
		}
		if p.err == nil && out[typ].Type == "" {
			p.fail("%s is empty", entry.name("rope_type"))
		}
	}
	if p.err != nil {
		return nil
	}
	return out
}
