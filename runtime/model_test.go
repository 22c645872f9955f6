package runtime

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// refIDs returns a fixture's id tensors.
func refIDs(t *testing.T, m *Model, fx string) map[string][]int {
	t.Helper()
	refs, err := readReference(filepath.Join(refDir(t, fx), "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	r := &parityRun{m: m, refs: refs}
	out := map[string][]int{}
	for _, n := range parityInputs {
		ids, err := r.ids(n, -1)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = ids
	}
	return out
}

// scenario runs prefill(prompt in chunks), denoise(canvas1), denoise(canvas2
// with SC), prefill(block1), denoise(canvas3) and returns every output.
func scenario(t *testing.T, m *Model, ids map[string][]int, chunks []int) [][]float32 {
	return scenarioOn(t, m.sequence(), ids, chunks)
}

// scenarioOn is scenario on any sequence (Model's or an Engine's).
func scenarioOn(t *testing.T, s sequence, ids map[string][]int, chunks []int) [][]float32 {
	t.Helper()
	defer s.release()
	var out [][]float32
	prompt := ids["prompt_ids"]
	var hidden []float32
	start := 0
	for _, n := range append(chunks, len(prompt)) {
		if n <= start {
			continue
		}
		h, err := s.prefill(prompt[start:n])
		if err != nil {
			t.Fatal(err)
		}
		hidden = append(hidden, h...)
		start = n
	}
	out = append(out, hidden)
	var hs [][]float32
	l1, err := s.denoise(ids["canvas1_ids"], nil, &hs)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, l1)
	out = append(out, hs...)
	sc := make([]float32, len(l1))
	for i, z := range l1 {
		sc[i] = z / 0.8
	}
	l2, err := s.denoise(ids["canvas2_ids"], sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := s.prefill(ids["block1_ids"])
	if err != nil {
		t.Fatal(err)
	}
	l3, err := s.denoise(ids["canvas3_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, l2, b1, l3)
}

// Prefilling the prompt in 2 or 3 chunks gives the same cache and outputs
// as one call (the sliding window straddles the chunk borders).
func TestChunkedPrefill(t *testing.T) {
	for _, fx := range []string{"tiny", "wide"} {
		m := loadModel(t, fx, "bf16")
		ids := refIDs(t, m, fx)
		P := len(ids["prompt_ids"])
		one := scenario(t, m, ids, nil)
		for _, chunks := range [][]int{{P / 2}, {5, 13}, {1, P - 1}} {
			got := scenario(t, m, ids, chunks)
			for i := range one {
				if d := maxAbsDiff32(one[i], got[i]); d > 1e-6 {
					t.Errorf("%s chunks %v: output %d differs by %g", fx, chunks, i, d)
				}
			}
		}
	}
}

// Results are bit-identical for every worker count.
func TestDeterministicAcrossWorkers(t *testing.T) {
	m := loadModel(t, "wide", "q4")
	ids := refIDs(t, m, "wide")
	m.SetWorkers(1)
	want := scenario(t, m, ids, nil)
	for _, w := range []int{2, 3, 8} {
		m.SetWorkers(w)
		got := scenario(t, m, ids, []int{7})
		for i := range want {
			for j := range want[i] {
				if math.Float32bits(want[i][j]) != math.Float32bits(got[i][j]) {
					t.Fatalf("workers %d: output %d[%d] = %v, want %v", w, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
	if m.Workers() != 8 {
		t.Errorf("Workers = %d", m.Workers())
	}
}

// Denoise reads the cache and never writes it; the sliding layers keep
// only the last W−1 positions, the full layers every position.
func TestCacheSemantics(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	ids := refIDs(t, m, "tiny")
	c := m.NewCache()
	if c.Len() != 0 {
		t.Fatalf("new cache Len = %d", c.Len())
	}
	if _, err := m.Prefill(c, ids["prompt_ids"]); err != nil {
		t.Fatal(err)
	}
	P := len(ids["prompt_ids"])
	if c.Len() != P {
		t.Fatalf("Len = %d, want %d", c.Len(), P)
	}
	W := m.Config().Text.SlidingWindow
	for i, l := range c.layers {
		want := P
		if m.dec[i].sliding {
			want = W - 1
		}
		if l.len() != want || l.start != P-want {
			t.Errorf("layer %d keeps %d positions from %d, want %d from %d", i, l.len(), l.start, want, P-want)
		}
	}
	before := c.Clone()
	a, err := m.Denoise(c, ids["canvas1_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != P {
		t.Errorf("Denoise changed Len to %d", c.Len())
	}
	for i := range c.layers {
		if !slices.Equal(c.layers[i].k, before.layers[i].k) || !slices.Equal(c.layers[i].v, before.layers[i].v) {
			t.Errorf("Denoise changed layer %d of the cache", i)
		}
	}
	b, err := m.Denoise(before, ids["canvas1_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if maxAbsDiff32(a, b) != 0 {
		t.Error("a cloned cache gives other logits")
	}
}

func TestInputErrors(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	other := loadModel(t, "tiny-distinct", "bf16")
	c := m.NewCache()
	V := m.Config().Text.VocabSize
	cases := []struct {
		name string
		err  error
		run  func() error
	}{
		{"empty prefill", ErrInput, func() error { _, err := m.Prefill(c, nil); return err }},
		{"id too large", ErrInput, func() error { _, err := m.Prefill(c, []int{2, V}); return err }},
		{"negative id", ErrInput, func() error { _, err := m.Denoise(c, []int{-1}, nil, nil); return err }},
		{"sc size", ErrInput, func() error { _, err := m.Denoise(c, []int{1, 2}, make([]float32, V), nil); return err }},
		{"foreign cache", ErrCache, func() error { _, err := m.Prefill(other.NewCache(), []int{2}); return err }},
		{"nil cache", ErrCache, func() error { _, err := m.Denoise(nil, []int{2}, nil, nil); return err }},
	}
	for _, tc := range cases {
		if err := tc.run(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if c.Len() != 0 {
		t.Errorf("failed calls changed the cache: Len %d", c.Len())
	}
}

// The hidden-state capture has L+1 entries of [C][H], the last one equal to
// the final-normed stream the logits come from.
func TestDenoiseHidden(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	ids := refIDs(t, m, "tiny")
	c := m.NewCache()
	if _, err := m.Prefill(c, ids["prompt_ids"]); err != nil {
		t.Fatal(err)
	}
	var hs [][]float32
	canvas := ids["canvas1_ids"]
	if _, err := m.Denoise(c, canvas, nil, &hs); err != nil {
		t.Fatal(err)
	}
	L, H := m.Config().Text.NumLayers, m.Config().Text.HiddenSize
	if len(hs) != L+1 {
		t.Fatalf("%d hidden states, want %d", len(hs), L+1)
	}
	for i, h := range hs {
		if len(h) != len(canvas)*H {
			t.Errorf("hidden %d has %d values", i, len(h))
		}
	}
	// Entry 0 is RMSNorm_noscale(embedding): unit RMS per row.
	for r := range len(canvas) {
		var ss float64
		for _, v := range hs[0][r*H : (r+1)*H] {
			ss += float64(v) * float64(v)
		}
		if rms := math.Sqrt(ss / float64(H)); math.Abs(rms-1) > 1e-5 {
			t.Errorf("row %d of the decoder input has RMS %g", r, rms)
		}
	}
}

// Image placeholder ids reach the encoder as the pad token.
func TestPrefillImageTokenIsPad(t *testing.T) {
	w := openPack(t, "tiny", "bf16")
	cfg, err := w.ReadFile("config.json")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(cfg), `"image_token_id": 258880`, `"image_token_id": 7`, 1)
	if edited == string(cfg) {
		t.Fatal("config.json has no image_token_id 258880")
	}
	m, err := Bind(&fakeWeights{tensors: w.Tensors(), files: func(string) ([]byte, error) { return []byte(edited), nil }})
	if err != nil {
		t.Fatal(err)
	}
	pad := m.Config().Text.PadTokenID
	a, err := m.Prefill(m.NewCache(), []int{2, 7, 9, 7})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Prefill(m.NewCache(), []int{2, pad, 9, pad})
	if err != nil {
		t.Fatal(err)
	}
	if maxAbsDiff32(a, b) != 0 {
		t.Error("an image placeholder is not embedded as pad")
	}
}

// Forward passes of one model on distinct caches may run concurrently.
func TestConcurrentForwards(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	ids := refIDs(t, m, "tiny")
	want := scenario(t, m, ids, nil)
	done := make(chan [][]float32, 3)
	for range 3 {
		go func() {
			c := m.NewCache()
			h, _ := m.Prefill(c, ids["prompt_ids"])
			l, _ := m.Denoise(c, ids["canvas1_ids"], nil, nil)
			done <- [][]float32{h, l}
		}()
	}
	for range 3 {
		got := <-done
		if maxAbsDiff32(got[0], want[0]) != 0 || maxAbsDiff32(got[1], want[1]) != 0 {
			t.Error("a concurrent pass gave other results")
		}
	}
}
