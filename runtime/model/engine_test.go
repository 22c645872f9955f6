package model

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// loadModel binds a fixture's pack; the pack stays open for the test.
func loadModel(t testing.TB, fx, profile string) *Model {
	t.Helper()
	m, err := Bind(PackWeights(fixture.OpenPack(t, fx, profile)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cpuEngine runs m on a CPU backend of workers goroutines (0: all cores).
func cpuEngine(t testing.TB, m *Model, workers int) *Engine {
	t.Helper()
	e, err := NewEngine(m, cpu.New(workers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// scenario runs prefill(prompt in chunks), denoise(canvas1) with hidden
// states, denoise(canvas2 with SC), prefill(block1), denoise(canvas3) on a
// fresh cache and returns every output.
func scenario(t testing.TB, e *Engine, ids map[string][]int, chunks []int) [][]float32 {
	t.Helper()
	c := e.NewCache()
	defer c.Free()
	H := e.Model().Hidden()
	prefill := func(ids []int) []float32 {
		h := make([]float32, len(ids)*H)
		if err := e.Prefill(t.Context(), c, ids, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	var out [][]float32
	prompt := ids["prompt_ids"]
	var hidden []float32
	start := 0
	for _, n := range append(chunks, len(prompt)) {
		if n > start {
			hidden = append(hidden, prefill(prompt[start:n])...)
			start = n
		}
	}
	out = append(out, hidden)
	var hs [][]float32
	l1, err := e.Denoise(t.Context(), c, ids["canvas1_ids"], nil, &hs)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, l1)
	out = append(out, hs...)
	sc := make([]float32, len(l1))
	for i, z := range l1 {
		sc[i] = z / 0.8
	}
	l2, err := e.Denoise(t.Context(), c, ids["canvas2_ids"], sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := prefill(ids["block1_ids"])
	l3, err := e.Denoise(t.Context(), c, ids["canvas3_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, l2, b1, l3)
}

// prefilled returns the tiny bf16 model, a CPU engine, a cache holding the
// reference prompt, and the reference ids.
func prefilled(t *testing.T) (*Model, *Engine, *Cache, map[string][]int) {
	t.Helper()
	m := loadModel(t, "tiny", "bf16")
	e := cpuEngine(t, m, 0)
	ids := fixture.RefIDs(t, "tiny")
	c := e.NewCache()
	t.Cleanup(func() { c.Free() })
	if err := e.Prefill(t.Context(), c, ids["prompt_ids"], nil); err != nil {
		t.Fatal(err)
	}
	return m, e, c, ids
}

// maxAbsDiff is max |a − b| (+Inf when the lengths differ).
func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// Prefilling the prompt in 2 or 3 chunks gives the same cache and outputs
// as one call (the sliding window straddles the chunk borders).
func TestChunkedPrefill(t *testing.T) {
	for _, fx := range []string{"tiny", "wide"} {
		e := cpuEngine(t, loadModel(t, fx, "bf16"), 0)
		ids := fixture.RefIDs(t, fx)
		P := len(ids["prompt_ids"])
		one := scenario(t, e, ids, nil)
		for _, chunks := range [][]int{{P / 2}, {5, 13}, {1, P - 1}} {
			got := scenario(t, e, ids, chunks)
			for i := range one {
				if d := maxAbsDiff(one[i], got[i]); d > 1e-6 {
					t.Errorf("%s chunks %v: output %d differs by %g", fx, chunks, i, d)
				}
			}
		}
	}
}

// Results on the CPU backend are bit-identical for every worker count.
func TestDeterministicAcrossWorkers(t *testing.T) {
	m := loadModel(t, "wide", "q4")
	ids := fixture.RefIDs(t, "wide")
	want := scenario(t, cpuEngine(t, m, 1), ids, nil)
	for _, w := range []int{2, 3, 8} {
		got := scenario(t, cpuEngine(t, m, w), ids, []int{7})
		for i := range want {
			for j := range want[i] {
				if math.Float32bits(want[i][j]) != math.Float32bits(got[i][j]) {
					t.Fatalf("workers %d: output %d[%d] = %v, want %v", w, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
}

// Denoise reads the cache and never advances it: the stored K/V rows of the
// prefix are unchanged, and a second Denoise gives the same logits.
func TestCacheSemantics(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	e := cpuEngine(t, m, 0)
	ids := fixture.RefIDs(t, "tiny")
	c := e.NewCache()
	defer c.Free()
	if c.Len() != 0 {
		t.Fatalf("new cache Len = %d", c.Len())
	}
	if err := e.Prefill(t.Context(), c, ids["prompt_ids"], nil); err != nil {
		t.Fatal(err)
	}
	P := len(ids["prompt_ids"])
	if c.Len() != P {
		t.Fatalf("Len = %d, want %d", c.Len(), P)
	}
	rows := func() [][]float32 {
		var out [][]float32
		for i, el := range e.dec {
			w := el.l.nkv * el.l.hd
			for _, b := range []backend.Buf{c.k[i], c.v[i]} {
				v := make([]float32, P*w)
				if err := e.b.Download(b, v); err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
		return out
	}
	before := rows()
	a, err := e.Denoise(t.Context(), c, ids["canvas1_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != P {
		t.Errorf("Denoise changed Len to %d", c.Len())
	}
	for i, r := range rows() {
		if maxAbsDiff(r, before[i]) != 0 {
			t.Errorf("Denoise changed cache buffer %d's prefix rows", i)
		}
	}
	b, err := e.Denoise(t.Context(), c, ids["canvas1_ids"], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if maxAbsDiff(a, b) != 0 {
		t.Error("a second Denoise gives other logits")
	}
}

func TestInputErrors(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	e := cpuEngine(t, m, 0)
	other := cpuEngine(t, m, 0)
	c := e.NewCache()
	defer c.Free()
	V := m.Vocab()
	cases := []struct {
		name string
		err  error
		run  func() error
	}{
		{"empty prefill", ErrInput, func() error { return e.Prefill(t.Context(), c, nil, nil) }},
		{"id too large", ErrInput, func() error { return e.Prefill(t.Context(), c, []int{2, V}, nil) }},
		{"hidden size", ErrInput, func() error { return e.Prefill(t.Context(), c, []int{2}, make([]float32, 3)) }},
		{"negative id", ErrInput, func() error { _, err := e.Denoise(t.Context(), c, []int{-1}, nil, nil); return err }},
		{"sc size", ErrInput, func() error { _, err := e.Denoise(t.Context(), c, []int{1, 2}, make([]float32, V), nil); return err }},
		{"foreign cache", ErrCache, func() error { return e.Prefill(t.Context(), other.NewCache(), []int{2}, nil) }},
		{"nil cache", ErrCache, func() error { _, err := e.Denoise(t.Context(), nil, []int{2}, nil, nil); return err }},
		{"step outputs", ErrInput, func() error { return e.Step(t.Context(), c, []int{2, 3}, false, 1, []float64{0.5}, StepStats{}) }},
		{"logits rows", ErrInput, func() error { return e.SetLogits(make([]float32, V+1)) }},
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

// The hidden-state capture has L+1 entries of [C][H], the first the
// unit-RMS decoder input.
func TestDenoiseHidden(t *testing.T) {
	m, e, c, ids := prefilled(t)
	var hs [][]float32
	canvas := ids["canvas1_ids"]
	if _, err := e.Denoise(t.Context(), c, canvas, nil, &hs); err != nil {
		t.Fatal(err)
	}
	L, H := m.Layers(), m.Hidden()
	if len(hs) != L+1 {
		t.Fatalf("%d hidden states, want %d", len(hs), L+1)
	}
	for i, h := range hs {
		if len(h) != len(canvas)*H {
			t.Errorf("hidden %d has %d values", i, len(h))
		}
	}
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

// Step's statistics are those of the tempered logits it leaves behind
// (cpu.Entropy, cpu.Argmax, cpu.Categorical on Logits), and a
// self-conditioned step reads what SetLogits put there.
func TestStep(t *testing.T) {
	m, e, c, ids := prefilled(t)
	canvas := ids["canvas1_ids"]
	C, V := len(canvas), m.Vocab()
	us := make([]float64, C)
	for i := range us {
		us[i] = float64(i) / float64(C)
	}
	out := StepStats{Entropy: make([]float32, C), Argmax: make([]int, C), Draw: make([]int, C)}
	step := func(selfCond bool, T float32) []float32 {
		if err := e.Step(t.Context(), c, canvas, selfCond, T, us, out); err != nil {
			t.Fatal(err)
		}
		z := make([]float32, C*V)
		if err := e.Logits(z); err != nil {
			t.Fatal(err)
		}
		return z
	}
	const T = 0.8
	z := step(false, T)
	raw, err := e.Denoise(t.Context(), c, canvas, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range C {
		row := z[i*V : (i+1)*V]
		for j, v := range raw[i*V : (i+1)*V] {
			if v/T != row[j] {
				t.Fatalf("tempered logit %d,%d = %v, want %v", i, j, row[j], v/T)
			}
		}
		if out.Entropy[i] != cpu.Entropy(row) || out.Argmax[i] != cpu.Argmax(row) || out.Draw[i] != cpu.Categorical(row, us[i]) {
			t.Fatalf("position %d: stats %v %d %d", i, out.Entropy[i], out.Argmax[i], out.Draw[i])
		}
	}
	// Self-conditioned on z: the same as Denoise with z as SC logits.
	if err := e.SetLogits(z); err != nil {
		t.Fatal(err)
	}
	got := step(true, 1)
	want, err := e.Denoise(t.Context(), c, canvas, z, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("self-conditioned step differs from Denoise by %g", d)
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
	e := cpuEngine(t, m, 0)
	pad := m.Config().Text.PadTokenID
	prefill := func(ids []int) []float32 {
		c := e.NewCache()
		defer c.Free()
		h := make([]float32, len(ids)*m.Hidden())
		if err := e.Prefill(t.Context(), c, ids, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if maxAbsDiff(prefill([]int{2, 7, 9, 7}), prefill([]int{2, pad, 9, pad})) != 0 {
		t.Error("an image placeholder is not embedded as pad")
	}
}

// One Model serves several Engines at once.
func TestConcurrentEngines(t *testing.T) {
	m := loadModel(t, "tiny", "bf16")
	ids := fixture.RefIDs(t, "tiny")
	want := scenario(t, cpuEngine(t, m, 0), ids, nil)
	var wg sync.WaitGroup
	got := make([][][]float32, 3)
	engines := []*Engine{cpuEngine(t, m, 1), cpuEngine(t, m, 2), cpuEngine(t, m, 0)}
	for i, e := range engines {
		wg.Go(func() { got[i] = scenario(t, e, ids, nil) })
	}
	wg.Wait()
	for i := range got {
		for j := range want {
			if maxAbsDiff(got[i][j], want[j]) != 0 {
				t.Errorf("engine %d: output %d differs", i, j)
			}
		}
	}
}
