package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/session"
)

// VerifySensitivity is one entry of VerifyReport.Sensitivity (--sensitivity):
// the source with only Class's tensors taken from the pack (only those of
// layer Layer when Layer is set: the expert banks, one entry per layer),
// every other tensor the source's, compared with the source on verify's
// windows (KLDMean, KL(source‖variant) in nats) and seeded generations
// (StepCost, variant steps / source steps per block; nil with no
// generations or no block committed by both).
type VerifySensitivity struct {
	Class    string   `json:"class"`
	Layer    *int     `json:"layer"`
	KLDMean  float64  `json:"kld_mean"`
	StepCost *float64 `json:"step_cost"`
}

// sensitivityVariant is one variant: the class taken from the pack, and
// the layer (-1: every layer).
type sensitivityVariant struct {
	class layout.Class
	layer int
}

// tensorLayer is the N of a name's ".layers.N." (-1 when it has none).
func tensorLayer(name string) int {
	_, rest, ok := strings.Cut(name, ".layers.")
	if !ok {
		return -1
	}
	digits, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// tensorClass is a manifest tensor's class: the manifest's, else derived
// from its name (ClassInvalid when neither tells).
func tensorClass(t dgq.Tensor) layout.Class {
	if t.Class.Valid() {
		return t.Class
	}
	c, _, err := layout.Classify(t.Name, len(t.Shape))
	if err != nil {
		return layout.ClassInvalid
	}
	return c
}

// sensitivityVariants lists the pack's quantized classes (a tensor of the
// class not raw) in layout's order, then one variant per layer holding
// quantized expert tensors, layers ascending.
func sensitivityVariants(m *dgq.Manifest) []sensitivityVariant {
	classes := map[layout.Class]bool{}
	layers := map[int]bool{}
	for _, t := range m.Tensors {
		if t.Format == codecs.Raw {
			continue
		}
		c := tensorClass(t)
		classes[c] = true
		if l := tensorLayer(t.Name); c == layout.Experts && l >= 0 {
			layers[l] = true
		}
	}
	var out []sensitivityVariant
	for _, c := range layout.Classes() {
		if classes[c] {
			out = append(out, sensitivityVariant{class: c, layer: -1})
		}
	}
	for _, l := range slices.Sorted(maps.Keys(layers)) {
		out = append(out, sensitivityVariant{class: layout.Experts, layer: l})
	}
	return out
}

// mixWeights serves the source's weights with the variant's tensors (the
// pack's quantized tensors of its class, and layer) in their place; side
// files are the source's.
type mixWeights struct {
	src     model.Weights
	tensors []backend.TensorData
}

func (w *mixWeights) Tensors() []backend.TensorData        { return w.tensors }
func (w *mixWeights) ReadFile(name string) ([]byte, error) { return w.src.ReadFile(name) }

// mix makes the variant's weights from the two packs'.
func (v sensitivityVariant) mix(pack *dgq.Pack, src model.Weights, packW model.Weights) *mixWeights {
	take := map[string]bool{}
	for _, t := range pack.Manifest.Tensors {
		if t.Format != codecs.Raw && tensorClass(t) == v.class && (v.layer < 0 || tensorLayer(t.Name) == v.layer) {
			take[t.Name] = true
		}
	}
	fromPack := map[string]backend.TensorData{}
	for _, t := range packW.Tensors() {
		if take[t.Name] {
			fromPack[t.Name] = t
		}
	}
	w := &mixWeights{src: src}
	for _, t := range src.Tensors() {
		if p, ok := fromPack[t.Name]; ok {
			t = p
		}
		w.tensors = append(w.tensors, t)
	}
	return w
}

// verifySensitivity measures each variant (sensitivityVariants of the pack)
// on the windows and, with generations, the seeded generations, as the main
// run measures the pack: each variant is bound from the two packs' weights
// (nothing written) and uploaded to the pack's backend, and its engine is
// closed before the next one. An empty (not nil) result: nothing quantized.
func verifySensitivity(ctx context.Context, ps, ss *session.Session, wins []verifyWindow, o VerifyOptions, T float32) ([]VerifySensitivity, error) {
	variants := sensitivityVariants(ps.Pack.Manifest)
	out := make([]VerifySensitivity, 0, len(variants))
	packW, srcW := model.PackWeights(ps.Pack), model.PackWeights(ss.Pack)
	steps := dgq.ProgressOrNop(o.Steps)
	steps.Start("sensitivity", int64(len(variants)))
	defer steps.Finish()
	for _, va := range variants {
		e, err := va.measure(ctx, ps, ss, packW, srcW, wins, o, T)
		if err != nil {
			name := va.class.String()
			if va.layer >= 0 {
				name += fmt.Sprintf(" layer %d", va.layer)
			}
			return nil, fmt.Errorf("verify: sensitivity of %s: %w", name, err)
		}
		out = append(out, e)
		steps.Add(1)
	}
	return out, nil
}

func (va sensitivityVariant) measure(ctx context.Context, ps, ss *session.Session, packW, srcW model.Weights, wins []verifyWindow, o VerifyOptions, T float32) (VerifySensitivity, error) {
	r := VerifySensitivity{Class: va.class.String()}
	if va.layer >= 0 {
		l := va.layer
		r.Layer = &l
	}
	m, err := model.Bind(va.mix(ps.Pack, srcW, packW))
	if err != nil {
		return r, err
	}
	e, err := model.NewEngine(m, ps.Engine.Backend())
	if err != nil {
		return r, err
	}
	defer e.Close()
	v := &verifyRun{pe: e, se: ss.Engine, V: ps.Model.Vocab(), T: T}
	v.acc = newVerifyAcc(len(o.NoiseRates), m.Layers())
	for w, win := range wins {
		if err := v.window(ctx, w, win, o); err != nil {
			return r, err
		}
	}
	var rep VerifyReport
	rep.NoiseRates = o.NoiseRates
	v.acc.report(&rep, false)
	r.KLDMean = rep.KLD.Mean
	if o.Generations > 0 {
		vs := &session.Session{Pack: ps.Pack, Model: m, Engine: e, Tokenizer: ps.Tokenizer, GenConfig: ps.GenConfig}
		_, conv, err := verifyGenerate(ctx, vs, ss, wins, o)
		if err != nil {
			return r, err
		}
		if conv != nil {
			c := conv.StepCost
			r.StepCost = &c
		}
	}
	return r, nil
}
