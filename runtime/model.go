package runtime

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/dgq-dev/dgq/layout"
)

// Options tune a bound model. The zero value is the default.
type Options struct {
	// Workers is the number of goroutines one forward pass uses; 0 means
	// GOMAXPROCS. Results are bit-identical for every value.
	Workers int
}

// Model is the bound text model: the decoder's weights (which the encoder
// shares through the ties), both sets of layer scalars, and the precomputed
// rotary frequencies. It is safe for concurrent forward passes on distinct
// caches.
type Model struct {
	cfg     *layout.Config
	workers int
	scratch sync.Pool

	hidden, heads, vocab       int
	numExperts, topK, expertFF int
	window                     int
	eps                        float32
	softcap                    float32
	embedScale                 float32 // f32(√H), see Bind
	routerRoot                 float32 // f32(H^−1/2)
	imageToken, padToken       int     // the encoder reads image placeholders as pad

	embed     *matrix // decoder embedding; also the tied lm_head and soft-embedding table
	encEmbed  *matrix // encoder embedding (the decoder's when tied)
	lmHead    *matrix
	norm      []float32 // decoder final norm
	encNorm   []float32 // encoder final norm
	dec, enc  []*layer
	scPreNorm []float32
	scGate    *matrix
	scUp      *matrix
	scDown    *matrix

	// routerGaps, when not nil, receives per token of a forward pass the
	// smallest selection margin of its routings over the layers (route):
	// set only around one forward pass by GenerateLockstep, which does not
	// run concurrently with others.
	routerGaps []float64
}

// layer is one transformer layer's weights. Encoder and decoder layers share
// every matrix and vector when the checkpoint ties them; layer_scalar is
// always their own.
type layer struct {
	sliding bool
	hd, nkv int
	rope    *rope

	inNorm, postAttnNorm                 []float32
	preFFNorm, postFFNorm                []float32
	postFFNorm1, preFFNorm2, postFFNorm2 []float32
	scalar                               float32
	q, k, v, o                           *matrix // v is nil on full layers (K=V)
	qNorm, kNorm                         []float32
	gate, up, down                       *matrix
	router                               *matrix
	routerScale, perExpertScale          []float32
	gateUp, expDown                      *matrix // [E·2F, H], [E·H, F]
}

// Config is the model's parsed config.json.
func (m *Model) Config() *layout.Config { return m.cfg }

// Workers is the number of goroutines one forward pass uses.
func (m *Model) Workers() int { return m.workers }

// SetWorkers changes the number of goroutines a forward pass uses (n ≤ 0:
// GOMAXPROCS). Results do not depend on it. Do not call it while a forward
// pass runs.
func (m *Model) SetWorkers(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	m.workers = n
}

// Prefill runs the encoder (causal) over ids at positions c.Len()…, appends
// their K/V to the cache and returns the final-normed hidden states
// ([len(ids)][H], row-major) (MODEL_SPEC §3.8). Prefilling in several chunks
// gives the same cache and outputs as one call. Image placeholder ids
// (config image_token_id) are embedded as the pad token, as transformers'
// encoder does for a text-only pass.
func (m *Model) Prefill(c *Cache, ids []int) ([]float32, error) {
	if err := m.checkCache(c); err != nil {
		return nil, err
	}
	if err := m.checkIDs("ids", ids); err != nil {
		return nil, err
	}
	S, H, pos0 := len(ids), m.hidden, c.n
	ids = m.encoderIDs(ids)
	x := m.embedRows(m.encEmbed, ids)
	for i, l := range m.enc {
		m.layerForward(l, x, S, pos0, &c.layers[i], true)
	}
	c.n += S
	rmsNormRows(x, m.encNorm, x, H, m.eps)
	return x, nil
}

// Denoise runs one decoder step over canvas at positions
// c.Len()…c.Len()+len(canvas)−1 (MODEL_SPEC §3.9): bidirectional over the
// canvas, attending to the cached prefix (sliding layers see only its last
// W−1 positions). It does not modify the cache. scLogits is nil (no
// self-conditioning: the first step of a block) or [len(canvas)][V] logits
// as transformers passes them (already divided by the temperature). It
// returns the soft-capped logits [len(canvas)][V]. When hidden is not nil, it
// appends L+1 copies of the residual stream ([len(canvas)][H] each): the
// decoder input after self-conditioning, the output of layers 1…L−1, and
// the final-normed output of layer L (transformers' hidden_states).
func (m *Model) Denoise(c *Cache, canvas []int, scLogits []float32, hidden *[][]float32) ([]float32, error) {
	if err := m.checkCache(c); err != nil {
		return nil, err
	}
	if err := m.checkIDs("canvas", canvas); err != nil {
		return nil, err
	}
	C, H, V, pos0 := len(canvas), m.hidden, m.vocab, c.n
	if scLogits != nil && len(scLogits) != C*V {
		return nil, inputErr("self-conditioning logits hold %d values, want %d×%d", len(scLogits), C, V)
	}
	x := m.embedRows(m.embed, canvas)
	if scLogits != nil {
		g := m.selfCondition(scLogits, C)
		for i := range x {
			x[i] += g[i]
		}
	} // without logits the SC MLP maps its zero input to exactly zero
	rmsNormRows(x, nil, x, H, m.eps)
	record := func() {
		if hidden != nil {
			*hidden = append(*hidden, append([]float32(nil), x...))
		}
	}
	record()
	for i, l := range m.dec {
		m.layerForward(l, x, C, pos0, &c.layers[i], false)
		if i < len(m.dec)-1 {
			record()
		}
	}
	rmsNormRows(x, m.norm, x, H, m.eps)
	record()
	logits := make([]float32, C*V)
	m.matmul(m.lmHead, 0, V, toF64(x, nil), C, logits, V)
	for i, z := range logits {
		logits[i] = softcap(z, m.softcap)
	}
	return logits, nil
}

// layerForward updates the residual stream x ([S][H]) through one layer
// (MODEL_SPEC §3.2).
func (m *Model) layerForward(l *layer, x []float32, S, pos0 int, kv *kvLayer, encoder bool) {
	H, eps := m.hidden, m.eps
	a := make([]float32, S*H)
	rmsNormRows(x, l.inNorm, a, H, eps)
	o := m.attention(l, a, S, pos0, kv, encoder)
	rmsNormRows(o, l.postAttnNorm, o, H, eps)
	for i, v := range o {
		x[i] += v
	}
	// Dense MLP on pre_feedforward_layernorm(x₁).
	rmsNormRows(x, l.preFFNorm, a, H, eps)
	h1 := m.denseMLP(l.gate, l.up, l.down, a, S)
	rmsNormRows(h1, l.postFFNorm1, h1, H, eps)
	// Router on the raw residual x₁, experts on pre_feedforward_layernorm_2(x₁).
	idx, wts := m.route(l, x, S)
	rmsNormRows(x, l.preFFNorm2, a, H, eps)
	h2 := m.experts(l, a, S, idx, wts)
	rmsNormRows(h2, l.postFFNorm2, h2, H, eps)
	for i := range h1 {
		h1[i] += h2[i]
	}
	rmsNormRows(h1, l.postFFNorm, h1, H, eps)
	for i := range x {
		x[i] = (x[i] + h1[i]) * l.scalar
	}
}

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

// embedRows gathers the embedding rows of ids (decoding only those rows)
// and multiplies them by the embedding scale (MODEL_SPEC §3.1.4).
func (m *Model) embedRows(e *matrix, ids []int) []float32 {
	H := m.hidden
	x := make([]float32, len(ids)*H)
	for t, id := range ids {
		row := x[t*H : (t+1)*H]
		e.decode(id, 1, row)
		for i := range row {
			row[i] *= m.embedScale
		}
	}
	return x
}

// selfCondition is the self-conditioning preamble's MLP output
// (MODEL_SPEC §3.9 step 2): P = softmax(ℓ_sc) in float32, the soft
// embedding (P·E)·s, v = pre_norm(soft), down(gelu(gate(v)) ⊙ up(v)).
func (m *Model) selfCondition(scLogits []float32, C int) []float32 {
	H := m.hidden
	soft := m.softEmbed(scLogits, C)
	for i := range soft {
		soft[i] *= m.embedScale
	}
	rmsNormRows(soft, m.scPreNorm, soft, H, m.eps)
	return m.denseMLP(m.scGate, m.scUp, m.scDown, soft, C)
}

// softChunk is how many canvas rows one soft-embedding item handles: each
// item decodes the whole embedding once, in bands, for its rows.
const softChunk = 16

// softEmbed is P·E for P = softmax of each [V] row of scLogits, computed in
// float32, times the [V][H] embedding: each sum over the vocabulary in
// order in float64, rounded once. Items of softChunk rows stream the
// embedding in bands of rows, so the table is never decoded whole and the
// probabilities of only softChunk rows are held per worker.
func (m *Model) softEmbed(scLogits []float32, C int) []float32 {
	H, V := m.hidden, m.vocab
	out := make([]float32, C*H)
	rb := max(1, bandElems/H)
	m.parallel((C+softChunk-1)/softChunk, func(s *scratch, item int) {
		t0 := item * softChunk
		n := min(softChunk, C-t0)
		s.vec = grow32(s.vec, n*V)
		probs := s.vec[:n*V]
		for r := range n {
			softmax(scLogits[(t0+r)*V:(t0+r+1)*V], probs[r*V:(r+1)*V])
		}
		s.vec2 = grow64(s.vec2, n*H)
		acc := s.vec2[:n*H]
		clear(acc)
		s.f32 = grow32(s.f32, rb*H)
		s.f64 = grow64(s.f64, rb*H)
		for v0 := 0; v0 < V; v0 += rb {
			nb := min(rb, V-v0)
			m.embed.decode64(v0, nb, s.f32, s.f64)
			for r := range n {
				a := acc[r*H : (r+1)*H]
				for i, p := range probs[r*V+v0 : r*V+v0+nb] {
					if p == 0 {
						continue // adds exactly nothing
					}
					pf := float64(p)
					e := s.f64[i*H : (i+1)*H]
					for j := range a {
						a[j] += pf * e[j]
					}
				}
			}
		}
		for i, v := range acc {
			out[t0*H+i] = float32(v)
		}
	})
	return out
}

func (m *Model) checkCache(c *Cache) error {
	if c == nil || c.m != m {
		return ErrCache
	}
	return nil
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
