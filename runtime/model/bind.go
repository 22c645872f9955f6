package model

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// defaultImageTokenID is transformers' image_token_id when config.json has none.
const defaultImageTokenID = 258880

// Bind binds a loaded pack to the text model its config.json describes.
//
// Binding is strict: before any tensor is used, every stored tensor is
// checked against the inventory the config implies (layout.ExpectedText),
// and one error wrapping ErrBinding (a *BindError) lists every missing and
// every unexpected text tensor, every duplicate, every shape mismatch and
// every tensor whose bytes do not decode as its format says. Vision tensors
// (model.encoder.vision_tower.*, model.encoder.embed_vision.*) are ignored;
// with tied weights, copies of decoder text weights under
// model.encoder.language_model. and a lm_head.weight are accepted when their
// shape matches the decoder twin, and the decoder's tensor is used. The
// encoder uses model.encoder.language_model.layers.N.layer_scalar, the
// decoder model.decoder.layers.N.layer_scalar.
func Bind(w Weights) (*Model, error) {
	raw, err := w.ReadFile("config.json")
	if err != nil {
		return nil, fmt.Errorf("%w: config.json: %v", ErrBinding, err)
	}
	cfg, err := layout.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBinding, err)
	}
	t := &cfg.Text
	if t.HiddenActivation != "gelu_pytorch_tanh" {
		return nil, fmt.Errorf("%w: hidden_activation %q is not supported (want gelu_pytorch_tanh)", ErrBinding, t.HiddenActivation)
	}
	if t.UseBidirectionalAttention == "all" {
		return nil, fmt.Errorf("%w: use_bidirectional_attention \"all\" (a non-causal encoder) is not supported", ErrBinding)
	}
	var top struct {
		ImageTokenID *int `json:"image_token_id"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("%w: config.json: %v", ErrBinding, err)
	}
	imageToken := defaultImageTokenID
	if top.ImageTokenID != nil {
		imageToken = *top.ImageTokenID
	}
	byName, err := checkInventory(cfg, w.Tensors())
	if err != nil {
		return nil, err
	}

	m := &Model{
		cfg:        cfg,
		hidden:     t.HiddenSize,
		heads:      t.NumHeads,
		vocab:      t.VocabSize,
		numExperts: t.NumExperts,
		topK:       t.TopK,
		expertFF:   t.MoEIntermediateSize,
		window:     t.SlidingWindow,
		eps:        float32(t.RMSNormEps),
		softcap:    float32(t.FinalLogitSoftcap),
		// transformers multiplies the gathered rows by √H cast to the
		// embedding weight's dtype; the reference model holds its weights in
		// float32, so the scale is float32(√H) (53.06599807739258 for H = 2816).
		embedScale: f32Sqrt(float64(t.HiddenSize)),
		routerRoot: float32(math.Pow(float64(t.HiddenSize), -0.5)),
		imageToken: imageToken,
		padToken:   t.PadTokenID,
	}
	b := binder{byName: byName}
	dec, enc := layout.DecoderPrefix, layout.EncoderTextPrefix
	m.embed = b.matrix(dec + "embed_tokens.weight")
	m.norm = b.vector(dec + "norm.weight")
	m.scPreNorm = b.vector(dec + "self_conditioning.pre_norm.weight")
	m.scGate = b.matrix(dec + "self_conditioning.gate_proj.weight")
	m.scUp = b.matrix(dec + "self_conditioning.up_proj.weight")
	m.scDown = b.matrix(dec + "self_conditioning.down_proj.weight")
	ropes := map[[2]int][]float32{}
	for i, g := range t.Layers {
		kind := 0
		if g.Type == layout.FullAttention {
			kind = 1
		}
		r, ok := ropes[[2]int{kind, g.HeadDim}]
		if !ok {
			if r, err = invFreq(t.Rope[g.Type], g.HeadDim); err != nil {
				return nil, fmt.Errorf("%w: layer %d (%s): %v", ErrBinding, i, g.Type, err)
			}
			ropes[[2]int{kind, g.HeadDim}] = r
		}
		l := b.layer(fmt.Sprintf("%slayers.%d.", dec, i), g, r)
		m.dec = append(m.dec, l)
		e := l
		if !cfg.TieWordEmbeddings {
			e = b.layer(fmt.Sprintf("%slayers.%d.", enc, i), g, r)
		} else {
			c := *l
			e = &c
		}
		e.scalar = b.scalar(fmt.Sprintf("%slayers.%d.layer_scalar", enc, i))
		m.enc = append(m.enc, e)
	}
	if cfg.TieWordEmbeddings {
		m.encEmbed, m.lmHead, m.encNorm = m.embed, m.embed, m.norm
	} else {
		m.encEmbed = b.matrix(enc + "embed_tokens.weight")
		m.encNorm = b.vector(enc + "norm.weight")
		m.lmHead = b.matrix(layout.LMHeadName)
	}
	if len(b.errs) > 0 {
		return nil, &BindError{Invalid: b.errs}
	}
	return m, nil
}

// checkInventory compares the stored tensors with the config's inventory and
// indexes them by name.
func checkInventory(cfg *layout.Config, tensors []backend.TensorData) (map[string]backend.TensorData, error) {
	want := map[string][]int64{}
	expected := layout.ExpectedText(cfg)
	for _, t := range expected {
		want[t.Name] = t.Shape
	}
	e := &BindError{}
	byName := make(map[string]backend.TensorData, len(tensors))
	dup := map[string]bool{}
	for _, t := range tensors {
		if _, seen := byName[t.Name]; seen {
			if !dup[t.Name] {
				e.Duplicate = append(e.Duplicate, t.Name)
			}
			dup[t.Name] = true
			continue
		}
		byName[t.Name] = t
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.SortFunc(names, layout.NaturalCompare)
	for _, n := range names {
		if dup[n] {
			continue
		}
		t := byName[n]
		twin := n
		if _, ok := want[n]; !ok {
			switch {
			case layout.IsVision(n):
				delete(byName, n)
				continue
			case n == layout.LMHeadName && cfg.TieWordEmbeddings:
				twin = layout.DecoderPrefix + "embed_tokens.weight"
			case cfg.TieWordEmbeddings:
				if d, ok := layout.DecoderTwin(n); ok {
					twin = d
				}
			}
		}
		shape, ok := want[twin]
		if !ok {
			e.Unexpected = append(e.Unexpected, n)
			continue
		}
		if !slices.Equal(shape, t.Shape) {
			e.Mismatched = append(e.Mismatched, ShapeMismatch{Name: n, Want: shape, Got: slices.Clone(t.Shape)})
			continue
		}
		if twin == n {
			if _, err := t.Matrix(); err != nil {
				e.Invalid = append(e.Invalid, fmt.Sprintf("%s: %v", n, cmp.Or(errors.Unwrap(err), err)))
			}
		}
	}
	for _, t := range expected {
		if _, ok := byName[t.Name]; !ok && !dup[t.Name] {
			e.Missing = append(e.Missing, t.Name)
		}
	}
	if e.Count() > 0 {
		return nil, e
	}
	return byName, nil
}

// binder resolves checked tensors by name, collecting the (unexpected after
// checkInventory) errors.
type binder struct {
	byName map[string]backend.TensorData
	errs   []string
}

func (b *binder) matrix(name string) *tensor {
	t := b.byName[name]
	g, err := t.Matrix()
	if err != nil {
		b.errs = append(b.errs, fmt.Sprintf("%s: %v", name, cmp.Or(errors.Unwrap(err), err)))
		return nil
	}
	return &tensor{TensorData: t, rows: int(g.Rows), cols: int(g.K)}
}

func (b *binder) vector(name string) []float32 {
	v, err := vector(b.byName[name])
	if err != nil {
		b.errs = append(b.errs, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			b.errs = append(b.errs, fmt.Sprintf("%s: holds a non-finite value", name))
			break
		}
	}
	return v
}

func (b *binder) scalar(name string) float32 {
	v := b.vector(name)
	if len(v) != 1 {
		return 0
	}
	return v[0]
}

func (b *binder) layer(p string, g layout.LayerGeom, invFreq []float32) *layer {
	l := &layer{
		sliding:        g.Type == layout.SlidingAttention,
		hd:             g.HeadDim,
		nkv:            g.KVHeads,
		invFreq:        invFreq,
		inNorm:         b.vector(p + "input_layernorm.weight"),
		postAttnNorm:   b.vector(p + "post_attention_layernorm.weight"),
		preFFNorm:      b.vector(p + "pre_feedforward_layernorm.weight"),
		postFFNorm:     b.vector(p + "post_feedforward_layernorm.weight"),
		postFFNorm1:    b.vector(p + "post_feedforward_layernorm_1.weight"),
		preFFNorm2:     b.vector(p + "pre_feedforward_layernorm_2.weight"),
		postFFNorm2:    b.vector(p + "post_feedforward_layernorm_2.weight"),
		scalar:         b.scalar(p + "layer_scalar"),
		q:              b.matrix(p + "self_attn.q_proj.weight"),
		k:              b.matrix(p + "self_attn.k_proj.weight"),
		o:              b.matrix(p + "self_attn.o_proj.weight"),
		qNorm:          b.vector(p + "self_attn.q_norm.weight"),
		kNorm:          b.vector(p + "self_attn.k_norm.weight"),
		gate:           b.matrix(p + "mlp.gate_proj.weight"),
		up:             b.matrix(p + "mlp.up_proj.weight"),
		down:           b.matrix(p + "mlp.down_proj.weight"),
		router:         b.matrix(p + "router.proj.weight"),
		routerScale:    b.vector(p + "router.scale"),
		perExpertScale: b.vector(p + "router.per_expert_scale"),
		gateUp:         b.matrix(p + "experts.gate_up_proj"),
		expDown:        b.matrix(p + "experts.down_proj"),
	}
	if g.HasVProj() {
		l.v = b.matrix(p + "self_attn.v_proj.weight")
	}
	return l
}
