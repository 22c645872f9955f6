package generate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// ErrConfig: a generation_config.json (or a Config built
// by hand) is malformed, holds a key transformers would refuse, or a value
// out of range. The message names the key.
var ErrConfig = errclass.New(errclass.Invalid, "generate: invalid generation config")

// Bounds on generation settings, so a hostile generation_config.json cannot
// make Generate allocate or loop absurdly.
const (
	MaxGenNewTokens = 1 << 20 // max_new_tokens
	MaxGenSteps     = 4096    // max_denoising_steps, stability_threshold
	maxGenLength    = 1 << 26 // max_length
	maxGenTokenID   = 1 << 24 // any token id
	maxGenEOS       = 64      // entries of eos_token_id
	maxGenTemp      = 1e3     // t_min, t_max
	maxGenBound     = 1e6     // sampler_config.entropy_bound
	maxGenConfident = 1e3     // confidence_threshold
)

// Config is DiffusionGemmaGenerationConfig (MODEL_SPEC §1.6),
// validated, with every default applied.
type Config struct {
	MaxNewTokens      int // max_new_tokens
	MaxDenoisingSteps int // max_denoising_steps (N)
	// EntropyBound is sampler_config.entropy_bound, in nats.
	EntropyBound float64
	TMin, TMax   float64 // t_min, t_max
	// StabilityThreshold is the number of previous argmax canvases the new one
	// must equal to count as stable (0: always stable).
	StabilityThreshold int
	// ConfidenceThreshold bounds the mean canvas entropy, in nats.
	ConfidenceThreshold float64
	EOSTokenIDs         []int // eos_token_id (an int is read as a one-entry list)
	PadTokenID          int   // pad_token_id
	BOSTokenID          int   // bos_token_id
	// MaxLength is max_length, 0 when unset. transformers' quirk (MODEL_SPEC
	// §4.1): when it is set and the effective max_new_tokens is 256, the
	// number of new tokens becomes MaxLength − prompt length.
	MaxLength int
}

// DefaultConfig returns the DiffusionGemmaGenerationConfig class
// defaults, which equal the released checkpoint's generation_config.json
// (MODEL_SPEC §1.6).
func DefaultConfig() *Config {
	return &Config{
		MaxNewTokens:        256,
		MaxDenoisingSteps:   48,
		EntropyBound:        0.1,
		TMin:                0.4,
		TMax:                0.8,
		StabilityThreshold:  1,
		ConfidenceThreshold: 0.005,
		EOSTokenIDs:         []int{1, 106, 50},
		PadTokenID:          0,
		BOSTokenID:          2,
	}
}

// genKnownKeys are the top-level keys DiffusionGemmaGenerationConfig accepts
// (MODEL_SPEC §1.6), the hub metadata keys included.
var genKnownKeys = []string{
	"max_new_tokens", "max_length", "return_dict_in_generate", "max_denoising_steps",
	"sampler_config", "t_min", "t_max", "stability_threshold", "confidence_threshold",
	"cache_implementation", "cache_config", "disable_compile",
	"bos_token_id", "pad_token_id", "eos_token_id",
	"transformers_version", "_from_model_config", "_commit_hash",
}

// ParseConfig reads generation_config.json strictly, as
// transformers' DiffusionGemmaGenerationConfig does (MODEL_SPEC §1.6):
//
//   - a key the class does not know (temperature, top_k, do_sample, …) is
//     refused; cache_implementation, cache_config, disable_compile and
//     return_dict_in_generate are accepted (type-checked) and have no effect:
//     dgq always uses DynamicCache semantics;
//   - sampler_config is a nested object whose _cls_name must be
//     EntropyBoundSamplerConfig and whose entropy_bound must be a JSON float
//     (1 is refused, 1.0 is not) > 0;
//   - t_max > t_min ≥ 0, confidence_threshold > 0, stability_threshold ≥ 0,
//     max_new_tokens and max_denoising_steps ≥ 1; integers must be JSON
//     integers; eos_token_id is an integer or a list of integers;
//   - a missing or null key takes the class default (DefaultConfig).
//
// Every number is bounded (max_new_tokens ≤ MaxGenNewTokens,
// max_denoising_steps ≤ MaxGenSteps, …). Every error wraps
// ErrConfig and names the key.
func ParseConfig(data []byte) (*Config, error) {
	top, err := genObject("generation_config.json", data)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for k := range top {
		if !slices.Contains(genKnownKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, genErr("unknown key(s) %s (DiffusionGemmaGenerationConfig refuses them)", strings.Join(unknown, ", "))
	}
	gc := DefaultConfig()
	p := genParser{m: top}
	p.integer("max_new_tokens", &gc.MaxNewTokens, 1, MaxGenNewTokens)
	p.integer("max_length", &gc.MaxLength, 1, maxGenLength)
	p.integer("max_denoising_steps", &gc.MaxDenoisingSteps, 1, MaxGenSteps)
	p.number("t_min", &gc.TMin, 0, maxGenTemp, false)
	p.number("t_max", &gc.TMax, 0, maxGenTemp, true)
	p.integer("stability_threshold", &gc.StabilityThreshold, 0, MaxGenSteps)
	p.number("confidence_threshold", &gc.ConfidenceThreshold, 0, maxGenConfident, true)
	p.integer("bos_token_id", &gc.BOSTokenID, 0, maxGenTokenID-1)
	p.integer("pad_token_id", &gc.PadTokenID, 0, maxGenTokenID-1)
	p.eos(&gc.EOSTokenIDs)
	p.boolean("return_dict_in_generate")
	p.boolean("disable_compile")
	p.boolean("_from_model_config")
	p.str("cache_implementation")
	p.str("transformers_version")
	p.str("_commit_hash")
	if raw, ok := p.get("cache_config"); ok && p.err == nil {
		if _, err := genObject("cache_config", raw); err != nil {
			p.err = err
		}
	}
	p.sampler(&gc.EntropyBound)
	if p.err != nil {
		return nil, p.err
	}
	if err := gc.validate(); err != nil {
		return nil, err
	}
	return gc, nil
}

// validate checks the invariants ParseConfig guarantees, for a
// config built by hand.
func (gc *Config) validate() error {
	switch {
	case gc.MaxNewTokens < 1 || gc.MaxNewTokens > MaxGenNewTokens:
		return genErr("max_new_tokens = %d out of range [1, %d]", gc.MaxNewTokens, MaxGenNewTokens)
	case gc.MaxLength < 0 || gc.MaxLength > maxGenLength:
		return genErr("max_length = %d out of range [1, %d] (0: unset)", gc.MaxLength, maxGenLength)
	case gc.MaxDenoisingSteps < 1 || gc.MaxDenoisingSteps > MaxGenSteps:
		return genErr("max_denoising_steps = %d out of range [1, %d]", gc.MaxDenoisingSteps, MaxGenSteps)
	case !(gc.EntropyBound > 0 && gc.EntropyBound <= maxGenBound):
		return genErr("sampler_config.entropy_bound = %g out of range (0, %g]", gc.EntropyBound, float64(maxGenBound))
	case !(gc.TMin >= 0 && gc.TMin <= maxGenTemp):
		return genErr("t_min = %g out of range [0, %g]", gc.TMin, float64(maxGenTemp))
	case !(gc.TMax > 0 && gc.TMax <= maxGenTemp):
		return genErr("t_max = %g out of range (0, %g]", gc.TMax, float64(maxGenTemp))
	case !(gc.TMax > gc.TMin):
		return genErr("t_max = %g must be greater than t_min = %g", gc.TMax, gc.TMin)
	case !(Temperature(gc, 1) > 0):
		return genErr("t_max = %g and t_min = %g give a zero float32 temperature on the last step", gc.TMax, gc.TMin)
	case gc.StabilityThreshold < 0 || gc.StabilityThreshold > MaxGenSteps:
		return genErr("stability_threshold = %d out of range [0, %d]", gc.StabilityThreshold, MaxGenSteps)
	case !(gc.ConfidenceThreshold > 0 && gc.ConfidenceThreshold <= maxGenConfident):
		return genErr("confidence_threshold = %g out of range (0, %g]", gc.ConfidenceThreshold, float64(maxGenConfident))
	case gc.PadTokenID < 0 || gc.PadTokenID >= maxGenTokenID:
		return genErr("pad_token_id = %d out of range [0, %d)", gc.PadTokenID, maxGenTokenID)
	case gc.BOSTokenID < 0 || gc.BOSTokenID >= maxGenTokenID:
		return genErr("bos_token_id = %d out of range [0, %d)", gc.BOSTokenID, maxGenTokenID)
	case len(gc.EOSTokenIDs) > maxGenEOS:
		return genErr("eos_token_id holds %d ids, at most %d allowed", len(gc.EOSTokenIDs), maxGenEOS)
	}
	for i, id := range gc.EOSTokenIDs {
		if id < 0 || id >= maxGenTokenID {
			return genErr("eos_token_id[%d] = %d out of range [0, %d)", i, id, maxGenTokenID)
		}
	}
	return nil
}

func genErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// genObject decodes a JSON object into its raw members.
func genObject(name string, raw []byte) (map[string]json.RawMessage, error) {
	s := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(s, "{") {
		return nil, genErr("%s: want a JSON object, got %.40q", name, s)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, genErr("%s: invalid JSON: %v", name, err)
	}
	return m, nil
}

// genParser reads typed members of one object; it keeps the first error and
// every method is a no-op after it.
type genParser struct {
	m      map[string]json.RawMessage
	prefix string // "sampler_config." inside the nested object
	err    error
}

// get returns the raw value of key; null counts as absent.
func (p *genParser) get(key string) (json.RawMessage, bool) {
	raw, ok := p.m[key]
	if !ok || strings.TrimSpace(string(raw)) == "null" {
		return nil, false
	}
	return raw, true
}

func (p *genParser) fail(key, format string, args ...any) {
	if p.err == nil {
		p.err = genErr("%s%s: "+format, append([]any{p.prefix, key}, args...)...)
	}
}

// genNumber reports whether s is a JSON number literal and whether it is
// written as an integer (no fraction, no exponent).
func genNumber(s string) (isNum, isInt bool) {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false, false
	}
	var f float64
	if json.Unmarshal([]byte(s), &f) != nil {
		// A valid literal whose value overflows float64 still is a number.
		var n json.Number
		if json.Unmarshal([]byte(s), &n) != nil {
			return false, false
		}
	}
	return true, !strings.ContainsAny(s, ".eE")
}

func (p *genParser) intValue(key string, raw json.RawMessage, lo, hi int) (int, bool) {
	s := strings.TrimSpace(string(raw))
	isNum, isInt := genNumber(s)
	if !isNum || !isInt {
		p.fail(key, "want an integer, got %.40s", s)
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < int64(lo) || v > int64(hi) {
		p.fail(key, "%.40s out of range [%d, %d]", s, lo, hi)
		return 0, false
	}
	return int(v), true
}

func (p *genParser) integer(key string, dst *int, lo, hi int) {
	if p.err != nil {
		return
	}
	if raw, ok := p.get(key); ok {
		if v, ok := p.intValue(key, raw, lo, hi); ok {
			*dst = v
		}
	}
}

// float reads a JSON number in [lo, hi] ((lo, hi] when loOpen).
func (p *genParser) number(key string, dst *float64, lo, hi float64, loOpen bool) {
	if p.err != nil {
		return
	}
	raw, ok := p.get(key)
	if !ok {
		return
	}
	p.floatValue(key, raw, dst, lo, hi, loOpen, false)
}

func (p *genParser) floatValue(key string, raw json.RawMessage, dst *float64, lo, hi float64, loOpen, wantFloat bool) {
	s := strings.TrimSpace(string(raw))
	isNum, isInt := genNumber(s)
	if !isNum {
		p.fail(key, "want a number, got %.40s", s)
		return
	}
	if wantFloat && isInt {
		p.fail(key, "want a float (such as %s.0), got the integer %.40s", s, s)
		return
	}
	v, err := strconv.ParseFloat(s, 64)
	open := "["
	if loOpen {
		open = "("
	}
	if err != nil || math.IsInf(v, 0) || v < lo || v > hi || (loOpen && v == lo) {
		p.fail(key, "%.40s out of range %s%g, %g]", s, open, lo, hi)
		return
	}
	*dst = v
}

func (p *genParser) boolean(key string) {
	if p.err != nil {
		return
	}
	if raw, ok := p.get(key); ok {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			p.fail(key, "want true or false, got %.40s", raw)
		}
	}
}

func (p *genParser) str(key string) {
	if p.err != nil {
		return
	}
	if raw, ok := p.get(key); ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			p.fail(key, "want a string, got %.40s", raw)
		}
	}
}

// eos reads eos_token_id: an integer or a list of integers.
func (p *genParser) eos(dst *[]int) {
	const key = "eos_token_id"
	if p.err != nil {
		return
	}
	raw, ok := p.get(key)
	if !ok {
		return
	}
	s := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(s, "[") {
		if v, ok := p.intValue(key, raw, 0, maxGenTokenID-1); ok {
			*dst = []int{v}
		}
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(key, "want an integer or a list of integers: %v", err)
		return
	}
	if len(items) > maxGenEOS {
		p.fail(key, "%d ids, at most %d allowed", len(items), maxGenEOS)
		return
	}
	ids := make([]int, 0, len(items))
	for i, it := range items {
		v, ok := p.intValue(fmt.Sprintf("%s[%d]", key, i), it, 0, maxGenTokenID-1)
		if !ok {
			return
		}
		ids = append(ids, v)
	}
	*dst = ids
}

// sampler reads the nested sampler_config object.
func (p *genParser) sampler(bound *float64) {
	const key = "sampler_config"
	if p.err != nil {
		return
	}
	raw, ok := p.get(key)
	if !ok {
		return
	}
	m, err := genObject(key, raw)
	if err != nil {
		p.err = err
		return
	}
	var unknown []string
	for k := range m {
		if k != "_cls_name" && k != "entropy_bound" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		p.fail(key, "unknown key(s) %s (EntropyBoundSamplerConfig refuses them)", strings.Join(unknown, ", "))
		return
	}
	q := genParser{m: m, prefix: key + "."}
	clsRaw, ok := q.get("_cls_name")
	if !ok {
		q.fail("_cls_name", "missing (want \"EntropyBoundSamplerConfig\")")
	} else {
		var cls string
		if json.Unmarshal(clsRaw, &cls) != nil || cls != "EntropyBoundSamplerConfig" {
			q.fail("_cls_name", "%.60s is not supported (want \"EntropyBoundSamplerConfig\")", clsRaw)
		}
	}
	if q.err == nil {
		if braw, ok := q.get("entropy_bound"); ok {
			q.floatValue("entropy_bound", braw, bound, 0, maxGenBound, true, true)
		}
	}
	p.err = q.err
}
