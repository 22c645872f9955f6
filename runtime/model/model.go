package model

import (
	"math"
	"slices"

	"github.com/dgq-dev/dgq/codecs"

	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// Model is the bound text model: the decoder's weights (which the encoder
// shares through the ties) as stored tensors, both sets of layer scalars,
// the small vectors decoded to float32 (norm weights, router scales), and
// the rotary frequencies. It computes nothing itself: an Engine runs it on
// a backend. A Model is immutable and may serve several Engines at once.
type Model struct {
	cfg *layout.Config

	hidden, heads, vocab       int
	numExperts, topK, expertFF int
	window                     int
	eps                        float32
	softcap                    float32
	embedScale                 float32 // f32(√H), see Bind
	routerRoot                 float32 // f32(H^−1/2)
	imageToken, padToken       int     // the encoder reads image placeholders as pad

	embed     *tensor // decoder embedding; also the tied lm_head and soft-embedding table
	encEmbed  *tensor // encoder embedding (the decoder's when tied)
	lmHead    *tensor
	norm      []float32 // decoder final norm
	encNorm   []float32 // encoder final norm
	dec, enc  []*layer
	scPreNorm []float32
	scGate    *tensor
	scUp      *tensor
	scDown    *tensor
}

// tensor is a bound stored tensor and its geometry as a [Rows, K] matrix.
type tensor struct {
	backend.TensorData
	rows, cols int
}

// layer is one transformer layer's weights. Encoder and decoder layers share
// every matrix and vector when the checkpoint ties them; layer_scalar is
// always their own.
type layer struct {
	sliding bool
	hd, nkv int
	invFreq []float32 // RoPEInvFreq of the layer's type (one slice per type)

	inNorm, postAttnNorm                 []float32
	preFFNorm, postFFNorm                []float32
	postFFNorm1, preFFNorm2, postFFNorm2 []float32
	scalar                               float32
	q, k, v, o                           *tensor // v is nil on full layers (K=V)
	qNorm, kNorm                         []float32
	gate, up, down                       *tensor
	router                               *tensor
	routerScale, perExpertScale          []float32
	gateUp, expDown                      *tensor // [E·2F, H], [E·H, F]
}

// Config is the model's parsed config.json.
func (m *Model) Config() *layout.Config { return m.cfg }

// Vocab is the vocabulary size V (the width of a logits row).
func (m *Model) Vocab() int { return m.vocab }

// Hidden is the hidden size H (the width of the residual stream).
func (m *Model) Hidden() int { return m.hidden }

// Layers is the number of decoder layers.
func (m *Model) Layers() int { return len(m.dec) }

// encoderIDs returns ids with image placeholders replaced by the pad token,
// as transformers' encoder does before the text embedding (a copy only when
// there is one).
func (m *Model) encoderIDs(ids []int) []int {
	if !slices.Contains(ids, m.imageToken) {
		return ids
	}
	ids = slices.Clone(ids)
	for i, id := range ids {
		if id == m.imageToken {
			ids[i] = m.padToken
		}
	}
	return ids
}

func (m *Model) checkIDs(what string, ids []int) error {
	if len(ids) == 0 {
		return inputErr("%s is empty", what)
	}
	for i, id := range ids {
		if id < 0 || id >= m.vocab {
			return inputErr("%s[%d] = %d is outside the vocabulary [0, %d)", what, i, id, m.vocab)
		}
	}
	return nil
}

// f32Sqrt is float32(√x) rounded once.
func f32Sqrt(x float64) float32 { return float32(math.Sqrt(x)) }

// lossiness orders formats by how far their decoded weights are from the
// source: raw is exact, nvfp4 the coarsest.
var lossiness = map[codecs.Format]int{codecs.Raw: 0, codecs.Q8: 1, codecs.Q6: 2, codecs.Q5: 3, codecs.Q4: 4, codecs.NVFP4: 5}

// WeightFormat is the lossiest storage format among the model's bound
// weights (codecs.Raw for a bf16 pack); check.DefaultBounds takes it.
func (m *Model) WeightFormat() codecs.Format {
	worst := codecs.Raw
	visit := func(w *tensor) {
		if w != nil && lossiness[w.Format] > lossiness[worst] {
			worst = w.Format
		}
	}
	for _, w := range []*tensor{m.embed, m.encEmbed, m.lmHead, m.scGate, m.scUp, m.scDown} {
		visit(w)
	}
	for _, ls := range [][]*layer{m.dec, m.enc} {
		for _, l := range ls {
			for _, w := range []*tensor{l.q, l.k, l.v, l.o, l.gate, l.up, l.down, l.router, l.gateUp, l.expDown} {
				visit(w)
			}
		}
	}
	return worst
}
