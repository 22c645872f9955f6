package runtime

import "fmt"

// scMode says what a denoising step is self-conditioned on.
type scMode int

const (
	scNone   scMode = iota // no self-conditioning (a block's first step)
	scPrev                 // the previous step's tempered logits
	scOneHot               // one-hot logits of the canvas itself (divergence #2)
)

// stepper is one sequence's forward pass as the generation loop drives it:
// the host keeps the loop, the RNG and the stop rules; the stepper keeps the
// cache and the logits (on a device they never leave it).
type stepper interface {
	// start prepares an empty sequence; close releases it.
	start() error
	close()
	// prefill appends ids to the sequence's cache.
	prefill(ids []int) error
	// step denoises canvas conditioned per sc, tempers the logits by T
	// (kept for the next step's scPrev), and writes each position's entropy
	// and argmax to ent and amax. draw(i) is the categorical draw of
	// position i with the uniform us[i]; it is valid until the next call.
	step(canvas []int, sc scMode, T float32, us []float64, ent []float32, amax []int) (draw func(i int) int, err error)
}

// logitStepper drives a model that returns logits to the host (Model, and
// the tests' fakes): the sampler statistics run on the host.
type logitStepper struct {
	m       genModel
	cache   *Cache
	workers int
	bf16SC  bool
	prev    []float32 // the last step's tempered logits
	rounded bool      // prev has been rounded to bf16
}

func newLogitStepper(m genModel) *logitStepper {
	s := &logitStepper{m: m, workers: sampWorkers(m)}
	if sr, ok := m.(genSCRounder); ok {
		s.bf16SC = sr.scLogitsBF16()
	}
	return s
}

func (s *logitStepper) start() error {
	s.cache, s.prev = s.m.NewCache(), nil
	return nil
}

func (s *logitStepper) close() { s.cache, s.prev = nil, nil }

func (s *logitStepper) prefill(ids []int) error {
	_, err := s.m.Prefill(s.cache, ids)
	return err
}

func (s *logitStepper) step(canvas []int, sc scMode, T float32, us []float64, ent []float32, amax []int) (func(int) int, error) {
	V, C := s.m.Config().Text.VocabSize, len(canvas)
	var scl []float32
	switch sc {
	case scPrev:
		if s.bf16SC && !s.rounded {
			for i, v := range s.prev {
				s.prev[i] = sampRoundBF16(v)
			}
			s.rounded = true
		}
		scl = s.prev
	case scOneHot:
		scl = genOneHotSC(canvas, V)
	}
	z, err := s.m.Denoise(s.cache, canvas, scl, nil)
	if err != nil {
		return nil, err
	}
	if len(z) != C*V {
		return nil, fmt.Errorf("%w: generate: the model returned %d logits, want %d×%d", ErrInput, len(z), C, V)
	}
	sampStepStats(z, C, V, T, s.workers, ent, amax) // z is now Z/T
	s.prev, s.rounded = z, false
	return func(i int) int { return sampCategorical(z[i*V:(i+1)*V], us[i]) }, nil
}
