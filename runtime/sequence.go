package runtime

// sequence is one sequence's forward pass with its own cache, on the host
// (Model) or a backend (Engine): what the parity scenarios drive.
type sequence interface {
	// prefill appends ids and returns their final-normed hidden states.
	prefill(ids []int) ([]float32, error)
	// denoise runs one decoder step (Model.Denoise's arguments).
	denoise(canvas []int, sc []float32, hidden *[][]float32) ([]float32, error)
	release()
}

type modelSeq struct {
	m *Model
	c *Cache
}

func (m *Model) sequence() sequence { return &modelSeq{m: m, c: m.NewCache()} }

func (s *modelSeq) prefill(ids []int) ([]float32, error) { return s.m.Prefill(s.c, ids) }
func (s *modelSeq) denoise(canvas []int, sc []float32, hidden *[][]float32) ([]float32, error) {
	return s.m.Denoise(s.c, canvas, sc, hidden)
}
func (s *modelSeq) release() {}

type engineSeq struct {
	e *Engine
	c *EngineCache
}

func (e *Engine) sequence() sequence { return &engineSeq{e: e, c: e.NewCache()} }

func (s *engineSeq) prefill(ids []int) ([]float32, error) {
	h := make([]float32, len(ids)*s.e.m.hidden)
	if err := s.e.Prefill(s.c, ids, h); err != nil {
		return nil, err
	}
	return h, nil
}
func (s *engineSeq) denoise(canvas []int, sc []float32, hidden *[][]float32) ([]float32, error) {
	return s.e.Denoise(s.c, canvas, sc, hidden)
}
func (s *engineSeq) release() { s.c.Free() }
