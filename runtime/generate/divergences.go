package generate

import "slices"

// The seed engine's deliberate divergences from transformers
// (MODEL_SPEC §4.6, seed doc Part II §6 and §9) that GenerateOptions can
// switch on. Each is off by default; with all off Generate follows the
// transformers contract (MODEL_SPEC §4.5). docs/sampler.md describes them.
const (
	// PlateauStop (#3): the accept mask is bit-identical for genPlateauSteps
	// consecutive steps and the mean entropy is below genPlateauEntropy.
	genPlateauSteps   = 8
	genPlateauEntropy = 0.05
	// EntropyOnlyStop (#9): from step genEntropyOnlyMinStep of a block on,
	// a mean entropy below genEntropyOnlyBound stops without stability.
	genEntropyOnlyMinStep = 12
	genEntropyOnlyBound   = 0.05
	// EmptyReplyReroll (#10): at most genRerollMax re-rolls of the first
	// block; re-roll k uses a canvas of max(C>>k, min(C, genRerollMinCanvas)).
	genRerollMax       = 3
	genRerollMinCanvas = 64
	// FirstStepSC (#2): the non-canvas entries of the one-hot SC logits.
	// softmax gives them exactly 0 (exp(−1e9) underflows), the canvas token
	// exactly 1, and the value survives a bf16 rounding.
	genOneHotOff = -1e9
)

// genOneHotSC returns the self-conditioning logits of the first-step SC
// seed (#2): 0 at each position's own canvas token and genOneHotOff
// elsewhere, so the model's soft embedding softmax(ℓ)·E·s is exactly the
// canvas embedding E[c]·s and the SC MLP runs on it.
func genOneHotSC(canvas []int, V int) []float32 {
	sc := make([]float32, len(canvas)*V)
	for i := range sc {
		sc[i] = genOneHotOff
	}
	for i, id := range canvas {
		sc[i*V+id] = 0
	}
	return sc
}

// genPlateau counts the consecutive steps of a block whose accept mask is
// bit-identical to the previous step's (#3).
type genPlateau struct {
	prev []bool
	run  int
}

// update records this step's mask and reports the run length (1 on the
// first step of a block or after a change).
func (p *genPlateau) update(mask []bool) int {
	if p.prev != nil && slices.Equal(p.prev, mask) {
		p.run++
	} else {
		p.run = 1
	}
	p.prev = append(p.prev[:0], mask...)
	return p.run
}

// genAllFiller reports whether every id of the argmax canvas is pad or an
// EOS id: a degenerate forward the pad gate (#4) never lets converge.
func genAllFiller(a []int, gc *Config) bool {
	for _, id := range a {
		if id != gc.PadTokenID && !slices.Contains(gc.EOSTokenIDs, id) {
			return false
		}
	}
	return true
}

// genDegenerateStart reports whether a committed first block starts with an
// EOS, pad or BOS id: an empty reply, which EmptyReplyReroll (#10) re-rolls.
// (dgq's runtime has no tokenizer, so "control token" means these ids.)
func genDegenerateStart(a []int, gc *Config) bool {
	if len(a) == 0 {
		return false
	}
	id := a[0]
	return id == gc.PadTokenID || id == gc.BOSTokenID || slices.Contains(gc.EOSTokenIDs, id)
}

// genRerollCanvas is the canvas length of re-roll k (k = 0: the first
// attempt): 256 → 128 → 64 for C = 256, never below min(C, 64).
func genRerollCanvas(C, k int) int {
	return max(C>>k, min(C, genRerollMinCanvas))
}
