package generate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
	"github.com/dgq-dev/dgq/runtime/model"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// genFakeCall is one recorded call of genFake.
type genFakeCall struct {
	pos  int       // first position (cache length at the call)
	ids  []int     // prefill ids or denoise canvas (a copy)
	sc   []float32 // denoise SC logits (a copy); nil when none
	step int       // denoise: 1-based call index since the last prefill
}

// genFake is a Stepper with crafted logits: logits(f, call) returns the raw
// [len(canvas)][V] logits of a denoise call. Step computes the statistics
// from them on the host as the engine does (temper by T, then each row's
// entropy, argmax and draw) and keeps the tempered logits as the next
// SCPrev input.
type genFake struct {
	cfg      layout.Config
	n        int
	block    int // prefills so far − 1: the block being denoised
	prefills []genFakeCall
	denoises []genFakeCall
	logits   func(f *genFake, c genFakeCall) []float32
	prev     []float32 // the last step's tempered logits
}

func genNewFake(V, C int, logits func(f *genFake, c genFakeCall) []float32) *genFake {
	return &genFake{cfg: layout.Config{CanvasLength: C, Text: layout.TextConfig{VocabSize: V}}, block: -1, logits: logits}
}

func (f *genFake) Start() error { f.prev = nil; return nil }
func (f *genFake) Close()       { f.prev = nil }

func (f *genFake) Prefill(ctx context.Context, ids []int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.prefills = append(f.prefills, genFakeCall{pos: f.n, ids: slices.Clone(ids)})
	f.n += len(ids)
	f.block++
	return nil
}

func (f *genFake) Step(ctx context.Context, canvas []int, sc SC, T float32, us []float64, out model.StepStats) error {
	V, C := f.cfg.Text.VocabSize, len(canvas)
	var scl []float32
	switch sc {
	case SCPrev:
		if len(f.prev) != C*V {
			return fmt.Errorf("SCPrev with %d previous logits, want %d×%d", len(f.prev), C, V)
		}
		scl = f.prev
	case SCOneHot:
		scl = genOneHotSC(canvas, V)
	}
	step := 1
	if k := len(f.denoises); k > 0 && f.denoises[k-1].pos == f.n {
		step = f.denoises[k-1].step + 1
	}
	c := genFakeCall{pos: f.n, ids: slices.Clone(canvas), sc: slices.Clone(scl), step: step}
	f.denoises = append(f.denoises, c)
	z := f.logits(f, c)
	if ctx.Err() != nil { // an engine stops within the step
		return fmt.Errorf("fake step: %w", ctx.Err())
	}
	if len(z) != C*V {
		return fmt.Errorf("%d crafted logits, want %d×%d", len(z), C, V)
	}
	tempered := make([]float32, len(z))
	cpu.TemperRow(z, T, tempered)
	for i := range C {
		row := tempered[i*V : (i+1)*V]
		out.Entropy[i] = cpu.Entropy(row)
		out.Argmax[i] = cpu.Argmax(row)
		out.Draw[i] = cpu.Categorical(row, us[i])
	}
	f.prev = tempered
	return nil
}

// genPeaks builds [len(peaks)][V] logits: 0 everywhere except height at
// each row's peak (a negative peak leaves the row flat).
func genPeaks(V int, peaks []int, height float32) []float32 {
	z := make([]float32, len(peaks)*V)
	for i, p := range peaks {
		if p >= 0 {
			z[i*V+p] = height
		}
	}
	return z
}

func genRepeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func genRun1(t *testing.T, f *genFake, prompt []int, gc *Config, o Options) (*Generation, []StepTrace) {
	t.Helper()
	var tr []StepTrace
	o.Trace = func(s StepTrace) { tr = append(tr, s) }
	g, err := Run(context.Background(), &f.cfg, f, prompt, gc, o)
	if err != nil {
		t.Fatal(err)
	}
	if g.Steps != len(tr) {
		t.Fatalf("Steps = %d, traced %d", g.Steps, len(tr))
	}
	return g, tr
}

func TestGenerateMultiAccept(t *testing.T) {
	const V, C = 16, 6
	f := genNewFake(V, C, func(_ *genFake, _ genFakeCall) []float32 {
		return genPeaks(V, []int{5, 5, 5, -1, -1, -1}, 30)
	})
	g, tr := genRun1(t, f, []int{2, 3}, DefaultConfig(), Options{Seed: 1, MaxNewTokens: C, MaxSteps: 3})
	// Three near-zero entropies and, first above the bound, the lowest-position
	// flat row: 4 accepted; the flat rows keep the mean entropy high.
	for _, s := range tr {
		if s.Accepted != 4 || s.Stopped {
			t.Errorf("step %+v: want 4 accepted and no stop", s)
		}
	}
	if len(f.denoises) != 3 || g.Steps != 3 {
		t.Fatalf("%d denoise calls, Steps %d; want 3", len(f.denoises), g.Steps)
	}
	for k := 1; k < 3; k++ {
		if got := f.denoises[k].ids[:3]; !slices.Equal(got, []int{5, 5, 5}) {
			t.Errorf("step %d canvas %v: the accepted peaked rows must hold their sample 5", k+1, f.denoises[k].ids)
		}
	}
	if want := []int{5, 5, 5, 0, 0, 0}; !slices.Equal(g.Tokens, want) || g.Blocks != 1 || g.StopReason != StopMaxLength {
		t.Errorf("got %+v, want tokens %v in one block", g, want)
	}
}

func TestGenerateStableConfidentStop(t *testing.T) {
	const V, C = 16, 4
	// argmax: token 3 on steps 1–2, token 7 from step 3 on; confident (peak
	// 30) from step 3 on, a moderate peak before.
	logits := func(_ *genFake, c genFakeCall) []float32 {
		tok, h := 3, float32(5)
		if c.step >= 3 {
			tok, h = 7, 30
		}
		return genPeaks(V, genRepeat(tok, C), h)
	}
	gc := DefaultConfig()
	z := genPeaks(V, []int{3}, 5)
	cpu.TemperRow(z, Temperature(gc, gc.MaxDenoisingSteps-1), z)
	if h := cpu.Entropy(z); h < 0.05 {
		t.Fatalf("setup: the moderate row's entropy %v is too small to be unconfident", h)
	}
	for _, tc := range []struct{ threshold, stopAt int }{{0, 3}, {1, 4}, {2, 5}, {3, 6}} {
		f := genNewFake(V, C, logits)
		gc := DefaultConfig()
		gc.StabilityThreshold = tc.threshold
		g, tr := genRun1(t, f, []int{2}, gc, Options{MaxNewTokens: C, MaxSteps: 10})
		if g.Steps != tc.stopAt || len(f.denoises) != tc.stopAt {
			t.Errorf("stability_threshold %d: stopped after %d steps, want %d", tc.threshold, g.Steps, tc.stopAt)
			continue
		}
		last := tr[len(tr)-1]
		if !last.Stopped || !last.Stable || last.MeanEntropy >= gc.ConfidenceThreshold {
			t.Errorf("stability_threshold %d: last step %+v", tc.threshold, last)
		}
		if tc.threshold > 0 && tr[0].Stable {
			t.Errorf("stability_threshold %d: the first step is stable", tc.threshold)
		}
		for _, s := range tr[:len(tr)-1] {
			if s.Stopped {
				t.Errorf("stability_threshold %d: early stop flag at %+v", tc.threshold, s)
			}
		}
		if want := genRepeat(7, C); !slices.Equal(g.Tokens, want) {
			t.Errorf("committed %v, want the last argmax %v", g.Tokens, want)
		}
	}
	// Never confident: all N steps run, the last argmax is committed.
	f := genNewFake(V, C, func(_ *genFake, c genFakeCall) []float32 {
		return genPeaks(V, genRepeat(c.step%V, C), 4)
	})
	g, tr := genRun1(t, f, []int{2}, gc, Options{MaxNewTokens: C, MaxSteps: 7})
	if g.Steps != 7 || tr[6].Stopped || !slices.Equal(g.Tokens, genRepeat(7, C)) {
		t.Errorf("unconfident: %+v, last trace %+v", g, tr[len(tr)-1])
	}
	gc7 := *gc
	gc7.MaxDenoisingSteps = 7
	for k, s := range tr {
		if want := float64(Temperature(&gc7, 7-k)); s.Temperature != want {
			t.Errorf("step %d: T = %v, want T(cur=%d) = %v with N = 7", k+1, s.Temperature, 7-k, want)
		}
	}
}

func TestGenerateEOSMidBlock(t *testing.T) {
	const V, C = 128, 6
	committed := []int{10, 11, 106, 12, 1, 13}
	for _, pad := range []int{0, 9} {
		f := genNewFake(V, C, func(_ *genFake, _ genFakeCall) []float32 { return genPeaks(V, committed, 30) })
		gc := DefaultConfig()
		gc.PadTokenID = pad
		g, _ := genRun1(t, f, []int{2, 40, 41}, gc, Options{MaxNewTokens: 3 * C})
		want := []int{10, 11, 106, pad, pad, pad}
		if !slices.Equal(g.Tokens, want) || g.Blocks != 1 || g.StopReason != StopEOS {
			t.Errorf("pad %d: got %+v, want tokens %v, one block, eos", pad, g, want)
		}
		if len(f.prefills) != 1 || g.Steps != 2 {
			t.Errorf("pad %d: %d prefills, %d steps; want 1 (the final block is never prefilled) and 2", pad, len(f.prefills), g.Steps)
		}
	}
}

func TestGenerateBlocksAndPrefills(t *testing.T) {
	const V, C = 32, 4
	prompt := []int{2, 5, 6}
	newFake := func() *genFake {
		return genNewFake(V, C, func(f *genFake, _ genFakeCall) []float32 {
			p := make([]int, C)
			for i := range p {
				p[i] = 10 + f.block*C + i
			}
			return genPeaks(V, p, 30)
		})
	}
	seq := func(from, n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = from + i
		}
		return s
	}
	gc := DefaultConfig()
	gc.MaxNewTokens = 9 // ⌈9/4⌉ = 3 blocks, 12 tokens, not truncated
	f := newFake()
	g, tr := genRun1(t, f, prompt, gc, Options{Seed: 5})
	if !slices.Equal(g.Tokens, seq(10, 12)) || g.Blocks != 3 || g.Steps != 6 || g.StopReason != StopMaxLength {
		t.Fatalf("got %+v", g)
	}
	wantPrefills := []genFakeCall{{pos: 0, ids: prompt}, {pos: 3, ids: seq(10, 4)}, {pos: 7, ids: seq(14, 4)}}
	if len(f.prefills) != len(wantPrefills) {
		t.Fatalf("%d prefills, want %d", len(f.prefills), len(wantPrefills))
	}
	for i, w := range wantPrefills {
		if p := f.prefills[i]; p.pos != w.pos || !slices.Equal(p.ids, w.ids) {
			t.Errorf("prefill %d: pos %d ids %v, want pos %d ids %v", i, p.pos, p.ids, w.pos, w.ids)
		}
	}
	for i, d := range f.denoises {
		block := i / 2
		if d.pos != 3+block*C || len(d.ids) != C {
			t.Errorf("denoise %d: pos %d, canvas %v; want pos %d", i, d.pos, d.ids, 3+block*C)
		}
		if first := d.step == 1; first != (d.sc == nil) {
			t.Errorf("denoise %d (step %d): SC logits present = %v", i, d.step, d.sc != nil)
		}
		if tr[i].Block != block || tr[i].Step != d.step {
			t.Errorf("trace %d: %+v", i, tr[i])
		}
	}
	// The SC logits of step 2 are step 1's logits divided by T(N), in float32.
	raw := f.logits(f, genFakeCall{}) // block 2's logits
	want := make([]float32, len(raw))
	cpu.TemperRow(raw, Temperature(gc, gc.MaxDenoisingSteps), want)
	if got := f.denoises[5].sc; !slices.Equal(got, want) {
		t.Errorf("step-2 SC logits are not the tempered step-1 logits")
	}

	// max_length quirk (MODEL_SPEC §4.1): max_new_tokens 256 and max_length
	// 11 with a 3-token prompt → 8 new tokens, 2 blocks.
	gc = DefaultConfig()
	gc.MaxLength = 11
	f = newFake()
	g, _ = genRun1(t, f, prompt, gc, Options{})
	if g.Blocks != 2 || len(g.Tokens) != 8 || len(f.prefills) != 2 {
		t.Errorf("max_length quirk: %+v, %d prefills", g, len(f.prefills))
	}
	// An explicit MaxNewTokens wins and ignores max_length: 5 → 2 blocks.
	f = newFake()
	g, _ = genRun1(t, f, prompt, gc, Options{MaxNewTokens: 5})
	if g.Blocks != 2 || len(g.Tokens) != 8 {
		t.Errorf("MaxNewTokens 5: %+v", g)
	}
	// The default max_new_tokens (256) is a single canvas of 256... here 64 blocks of 4.
	f = newFake()
	f.logits = func(*genFake, genFakeCall) []float32 { return genPeaks(V, []int{3, 4, 5, 6}, 30) }
	g, _ = genRun1(t, f, prompt, DefaultConfig(), Options{})
	if g.Blocks != 64 || len(g.Tokens) != 256 || f.prefills[63].pos != 3+62*C {
		t.Errorf("default: %d blocks, %d tokens", g.Blocks, len(g.Tokens))
	}
}

func TestGenerateSeeds(t *testing.T) {
	const V, C = 32, 8
	// The argmax depends on the canvas, so the output depends on the draws.
	logits := func(_ *genFake, c genFakeCall) []float32 {
		p := make([]int, C)
		for i, id := range c.ids {
			p[i] = (id*7 + i) % V
		}
		return genPeaks(V, p, 3)
	}
	run := func(seed uint64) (*Generation, *genFake) {
		f := genNewFake(V, C, logits)
		g, _ := genRun1(t, f, []int{2, 9}, DefaultConfig(), Options{Seed: seed, MaxNewTokens: 2 * C, MaxSteps: 5})
		return g, f
	}
	g1, f1 := run(11)
	g2, f2 := run(11)
	g3, f3 := run(12)
	if !slices.Equal(g1.Tokens, g2.Tokens) || len(f1.denoises) != len(f2.denoises) {
		t.Fatalf("same seed, different output: %v vs %v", g1.Tokens, g2.Tokens)
	}
	for i := range f1.denoises {
		if !slices.Equal(f1.denoises[i].ids, f2.denoises[i].ids) {
			t.Fatalf("same seed: canvas %d differs", i)
		}
	}
	if slices.Equal(f1.denoises[0].ids, f3.denoises[0].ids) || slices.Equal(g1.Tokens, g3.Tokens) {
		t.Errorf("different seeds, same canvas %v or tokens %v", f1.denoises[0].ids, g1.Tokens)
	}
	// The initial canvas is the first C draws of the documented RNG.
	want := make([]int, C)
	newGenRNG(11).ids(want, V)
	if !slices.Equal(f1.denoises[0].ids, want) {
		t.Errorf("initial canvas %v, want the first draws %v", f1.denoises[0].ids, want)
	}
}

func TestGenerateArgmaxAccept(t *testing.T) {
	const V, C = 16, 4
	// Row 0 has the lowest entropy (always accepted alone) and argmax 4 of
	// probability about 0.2; the others are flat.
	f0 := func() *genFake {
		return genNewFake(V, C, func(*genFake, genFakeCall) []float32 { return genPeaks(V, []int{4, -1, -1, -1}, 1) })
	}
	for _, argmaxAccept := range []bool{false, true} {
		f := f0()
		_, tr := genRun1(t, f, []int{2}, DefaultConfig(), Options{Seed: 3, MaxNewTokens: C, MaxSteps: 12, ArgmaxAccept: argmaxAccept})
		other := 0
		for k, d := range f.denoises[1:] {
			if tr[k].Accepted != 1 {
				t.Fatalf("step %d: %d accepted, want 1", k+1, tr[k].Accepted)
			}
			if d.ids[0] != 4 {
				other++
			}
		}
		if argmaxAccept && other != 0 {
			t.Errorf("ArgmaxAccept: %d accepted positions hold a sample, not the argmax", other)
		}
		if !argmaxAccept && other == 0 {
			t.Errorf("HF sampling: every accepted position holds the argmax (p ≈ 0.2)")
		}
	}
	// The RNG stream is the same either way: the initial canvases of a
	// two-block run agree.
	fa, fb := f0(), f0()
	fa.logits = func(*genFake, genFakeCall) []float32 { return genPeaks(V, []int{4, 4, 4, 4}, 30) }
	fb.logits = fa.logits
	genRun1(t, fa, []int{2}, DefaultConfig(), Options{Seed: 3, MaxNewTokens: 2 * C})
	genRun1(t, fb, []int{2}, DefaultConfig(), Options{Seed: 3, MaxNewTokens: 2 * C, ArgmaxAccept: true})
	if len(fa.denoises) != 4 || len(fb.denoises) != 4 || !slices.Equal(fa.denoises[2].ids, fb.denoises[2].ids) {
		t.Errorf("ArgmaxAccept changed the RNG consumption")
	}
}

func TestGenerateFirstStepSC(t *testing.T) {
	const V, C = 16, 4
	for _, on := range []bool{false, true} {
		f := genNewFake(V, C, func(*genFake, genFakeCall) []float32 { return genPeaks(V, []int{4, 5, 6, 7}, 30) })
		genRun1(t, f, []int{2}, DefaultConfig(), Options{MaxNewTokens: 2 * C, FirstStepSC: on})
		for _, d := range f.denoises {
			if d.step != 1 {
				continue
			}
			if !on {
				if d.sc != nil {
					t.Errorf("HF: first-step SC logits present")
				}
				continue
			}
			if len(d.sc) != C*V {
				t.Fatalf("FirstStepSC: %d SC logits", len(d.sc))
			}
			for i, id := range d.ids {
				for v := range V {
					want := float32(genOneHotOff)
					if v == id {
						want = 0
					}
					if d.sc[i*V+v] != want {
						t.Fatalf("FirstStepSC: sc[%d][%d] = %v, want %v", i, v, d.sc[i*V+v], want)
					}
				}
				// softmax puts all the mass on the canvas token: no
				// entropy, and every uniform draws it.
				row := d.sc[i*V : (i+1)*V]
				if h := cpu.Entropy(row); h != 0 {
					t.Fatalf("one-hot row %d: entropy %v", i, h)
				}
				for _, u := range []float64{0, math.Nextafter(1, 0)} {
					if got := cpu.Categorical(row, u); got != id {
						t.Fatalf("one-hot row %d: u=%v draws %d, want %d", i, u, got, id)
					}
				}
			}
		}
	}
}

func TestGenerateStopDivergences(t *testing.T) {
	const V, C, N = 16, 4, 20
	// Near-zero entropies everywhere, but the argmax moves every step: HF
	// never stops; the accept mask (everything) never changes.
	moving := func(_ *genFake, c genFakeCall) []float32 {
		return genPeaks(V, genRepeat(2+c.step%10, C), 30)
	}
	for _, tc := range []struct {
		name   string
		o      Options
		stopAt int
	}{
		{"HF", Options{}, N},
		{"PlateauStop", Options{PlateauStop: true}, genPlateauSteps},
		{"EntropyOnlyStop", Options{EntropyOnlyStop: true}, genEntropyOnlyMinStep},
		{"both", Options{PlateauStop: true, EntropyOnlyStop: true}, genPlateauSteps},
	} {
		f := genNewFake(V, C, moving)
		tc.o.MaxNewTokens, tc.o.MaxSteps = C, N
		g, tr := genRun1(t, f, []int{2}, DefaultConfig(), tc.o)
		if g.Steps != tc.stopAt {
			t.Errorf("%s: %d steps, want %d", tc.name, g.Steps, tc.stopAt)
		}
		if tc.stopAt < N && (!tr[len(tr)-1].Stopped || tr[len(tr)-1].Stable) {
			t.Errorf("%s: last step %+v", tc.name, tr[len(tr)-1])
		}
	}
	// A plateau above 0.05 nats of mean entropy does not stop.
	f := genNewFake(V, C, func(_ *genFake, c genFakeCall) []float32 {
		return genPeaks(V, []int{2 + c.step%10, -1, -1, -1}, 30)
	})
	if g, _ := genRun1(t, f, []int{2}, DefaultConfig(), Options{MaxNewTokens: C, MaxSteps: N, PlateauStop: true, EntropyOnlyStop: true}); g.Steps != N {
		t.Errorf("high-entropy plateau stopped after %d steps", g.Steps)
	}

	// PadGate: an all-pad argmax is stable and confident at step 2 for HF,
	// never converged with the gate.
	const n = 6
	for _, gate := range []bool{false, true} {
		f := genNewFake(V, C, func(*genFake, genFakeCall) []float32 { return genPeaks(V, genRepeat(0, C), 30) })
		g, _ := genRun1(t, f, []int{2}, DefaultConfig(), Options{MaxNewTokens: C, MaxSteps: n, PadGate: gate})
		want := 2
		if gate {
			want = n
		}
		if g.Steps != want || !slices.Equal(g.Tokens, genRepeat(0, C)) {
			t.Errorf("PadGate %v: %+v, want %d steps", gate, g, want)
		}
	}
	// The gate does not hold back a real answer.
	f = genNewFake(V, C, func(*genFake, genFakeCall) []float32 { return genPeaks(V, []int{5, 0, 0, 0}, 30) })
	if g, _ := genRun1(t, f, []int{2}, DefaultConfig(), Options{MaxNewTokens: C, MaxSteps: n, PadGate: true}); g.Steps != 2 {
		t.Errorf("PadGate on a non-pad canvas: %d steps", g.Steps)
	}
}

func TestGenerateEmptyReplyReroll(t *testing.T) {
	const V, C = 8, 256
	// Block 0 starts with EOS (1) while its canvas has ≥ 128 positions.
	logits := func(f *genFake, c genFakeCall) []float32 {
		p := genRepeat(5, len(c.ids))
		p[0] = 3
		if f.block == 0 && len(c.ids) >= 128 {
			p[0] = 1
		}
		return genPeaks(V, p, 30)
	}
	gc := DefaultConfig()
	gc.EOSTokenIDs = []int{1}
	prompt := []int{2, 6, 7}

	f := genNewFake(V, C, logits)
	g, _ := genRun1(t, f, prompt, gc, Options{MaxNewTokens: 300})
	if g.StopReason != StopEOS || len(g.Tokens) != C || g.Tokens[0] != 1 || g.Tokens[1] != gc.PadTokenID {
		t.Errorf("HF: %+v", g.StopReason)
	}

	f = genNewFake(V, C, logits)
	g, _ = genRun1(t, f, prompt, gc, Options{MaxNewTokens: 300, EmptyReplyReroll: true})
	var lens []int
	for _, d := range f.denoises {
		lens = append(lens, len(d.ids))
	}
	if want := []int{256, 256, 128, 128, 64, 64, 256, 256}; !slices.Equal(lens, want) {
		t.Fatalf("canvas lengths %v, want %v", lens, want)
	}
	if g.StopReason != StopMaxLength || len(g.Tokens) != 64+256 || g.Tokens[0] != 3 || g.Blocks != 2 {
		t.Errorf("re-rolled: %d tokens, first %d, %s", len(g.Tokens), g.Tokens[0], g.StopReason)
	}
	if len(f.prefills) != 2 || f.prefills[1].pos != 3 || len(f.prefills[1].ids) != 64 || f.denoises[6].pos != 3+64 {
		t.Errorf("prefills after a shrunk first block: %+v", f.prefills)
	}

	// Every attempt degenerate: 1 + 3 attempts, the last one kept.
	f = genNewFake(V, C, func(_ *genFake, c genFakeCall) []float32 { return genPeaks(V, genRepeat(1, len(c.ids)), 30) })
	g, _ = genRun1(t, f, prompt, gc, Options{MaxNewTokens: 300, EmptyReplyReroll: true})
	if len(f.denoises) != 8 || len(g.Tokens) != 64 || g.StopReason != StopEOS || g.Steps != 8 {
		t.Errorf("all degenerate: %d denoise calls, %+v", len(f.denoises), g)
	}
}

func TestGenerateCancel(t *testing.T) {
	const V, C = 16, 4
	f := genNewFake(V, C, func(*genFake, genFakeCall) []float32 { return genPeaks(V, []int{4, 5, 6, 7}, 30) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steps := 0
	g, err := Run(ctx, &f.cfg, f, []int{2}, DefaultConfig(), Options{MaxNewTokens: 3 * C, Trace: func(s StepTrace) {
		if steps++; steps == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || g == nil || g.StopReason != StopCanceled {
		t.Fatalf("got %+v, %v", g, err)
	}
	// Block 0 finished at step 2; block 1 was canceled after its first step.
	if g.Blocks != 1 || len(g.Tokens) != C || g.Steps != 3 || len(f.denoises) != 3 {
		t.Errorf("canceled run: %+v, %d denoise calls", g, len(f.denoises))
	}
}

// A cancellation that the stepper sees inside a step (as the Engine does,
// between layers and ops) ends Generate with the committed blocks and an
// error that wraps context.Canceled.
func TestGenerateCancelInsideStep(t *testing.T) {
	const V, C = 16, 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	f := genNewFake(V, C, func(*genFake, genFakeCall) []float32 {
		if calls++; calls == 4 { // block 0 takes 2 steps: the 2nd step of block 1
			cancel()
		}
		return genPeaks(V, []int{4, 5, 6, 7}, 30)
	})
	var blocks []BlockCommit
	g, err := Run(ctx, &f.cfg, f, []int{2}, DefaultConfig(), Options{MaxNewTokens: 3 * C, OnBlock: func(b BlockCommit) { blocks = append(blocks, b) }})
	if !errors.Is(err, context.Canceled) || g == nil {
		t.Fatalf("got %+v, %v", g, err)
	}
	if g.StopReason != StopCanceled || g.Blocks != 1 || len(g.Tokens) != C || len(blocks) != 1 || blocks[0].Last {
		t.Errorf("canceled in block 1: %+v, blocks %+v", g, blocks)
	}
}

// OnBlock sees every committed block once, in order, with the tokens
// Generation.Tokens holds, each block's steps and the last block marked;
// setting it changes nothing else.
func TestGenerateOnBlock(t *testing.T) {
	const V, C = 16, 4
	logits := func(_ *genFake, c genFakeCall) []float32 {
		ids := []int{4 + c.pos%5, 5, 6, 7}
		if c.pos > 10 {
			ids[2] = 1 // an EOS id in the third block
		}
		return genPeaks(V, ids, 30)
	}
	prompt := []int{2, 3, 9}
	cases := []struct {
		name   string
		o      Options
		blocks int
		stop   string
	}{
		{"eos", Options{Seed: 3, MaxNewTokens: 5 * C}, 3, StopEOS},
		{"max length", Options{Seed: 3, MaxNewTokens: 2 * C}, 2, StopMaxLength},
		{"one block", Options{Seed: 3, MaxNewTokens: 1}, 1, StopMaxLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wf := genNewFake(V, C, logits)
			want, err := Run(context.Background(), &wf.cfg, wf, prompt, DefaultConfig(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			var got []BlockCommit
			o := tc.o
			o.OnBlock = func(b BlockCommit) { got = append(got, b) }
			f := genNewFake(V, C, logits)
			g, err := Run(context.Background(), &f.cfg, f, prompt, DefaultConfig(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.Tokens, want.Tokens) || g.Steps != want.Steps || g.StopReason != tc.stop || len(got) != tc.blocks || g.Blocks != tc.blocks {
				t.Fatalf("with OnBlock: %+v (%d calls), without: %+v", g, len(got), want)
			}
			var tokens []int
			steps := 0
			for i, b := range got {
				if b.Block != i || b.Last != (i == len(got)-1) || (b.Last && b.StopReason != tc.stop) || (!b.Last && b.StopReason != "") {
					t.Errorf("block %d: %+v", i, b)
				}
				steps += b.Steps
				if b.TotalSteps != steps {
					t.Errorf("block %d: total steps %d, want %d", i, b.TotalSteps, steps)
				}
				tokens = append(tokens, b.Tokens...)
			}
			if !slices.Equal(tokens, g.Tokens) || steps != g.Steps {
				t.Errorf("blocks give %v in %d steps, the generation %v in %d", tokens, steps, g.Tokens, g.Steps)
			}
		})
	}
}

func TestGenerateInputErrors(t *testing.T) {
	f := genNewFake(16, 4, func(*genFake, genFakeCall) []float32 { return make([]float32, 64) })
	bad := DefaultConfig()
	bad.TMax = 0.1
	padOut := DefaultConfig()
	padOut.PadTokenID = 16
	short := DefaultConfig()
	short.MaxLength = 2
	for _, tc := range []struct {
		prompt []int
		gc     *Config
		o      Options
		want   error
	}{
		{nil, nil, Options{}, model.ErrInput},
		{[]int{16}, nil, Options{}, model.ErrInput},
		{[]int{-1}, nil, Options{}, model.ErrInput},
		{[]int{1}, nil, Options{MaxSteps: -1}, model.ErrInput},
		{[]int{1}, nil, Options{MaxNewTokens: MaxGenNewTokens + 1}, model.ErrInput},
		{[]int{1}, bad, Options{}, ErrConfig},
		{[]int{1}, padOut, Options{}, ErrConfig},
		{[]int{1, 2}, short, Options{}, ErrConfig},
	} {
		if _, err := Run(context.Background(), &f.cfg, f, tc.prompt, tc.gc, tc.o); !errors.Is(err, tc.want) {
			t.Errorf("prompt %v, %+v: %v, want %v", tc.prompt, tc.o, err, tc.want)
		}
	}
	if len(f.prefills) != 0 {
		t.Errorf("a rejected call prefilled")
	}
}

// TestGenerateTiny generates on the tiny fixture's bf16 pack with the CPU
// backend: deterministic at a fixed seed, k·C tokens in the vocabulary.
func TestGenerateTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes and runs the tiny model")
	}
	m, err := model.Bind(model.PackWeights(fixture.OpenPack(t, "tiny", "bf16")))
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(0)
	defer b.Close()
	e, err := model.NewEngine(m, b)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	gc := DefaultConfig()
	prompt := []int{2, 17, 99, 250, 311, 7}
	o := Options{Seed: 1234, MaxNewTokens: 20, MaxSteps: 6}
	g1, err := Generate(context.Background(), e, prompt, gc, o)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := Generate(context.Background(), e, prompt, gc, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g1.Tokens, g2.Tokens) || g1.Steps != g2.Steps {
		t.Fatalf("same seed: %v / %v", g1.Tokens, g2.Tokens)
	}
	C, V := m.Config().CanvasLength, m.Config().Text.VocabSize
	if len(g1.Tokens) != g1.Blocks*C || (g1.StopReason == StopMaxLength && g1.Blocks != 2) {
		t.Errorf("%d tokens in %d blocks (%s)", len(g1.Tokens), g1.Blocks, g1.StopReason)
	}
	for _, id := range g1.Tokens {
		if id < 0 || id >= V {
			t.Fatalf("token %d outside the vocabulary", id)
		}
	}
	o.Seed = 1235
	g3, err := Generate(context.Background(), e, prompt, gc, o)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(g1.Tokens, g3.Tokens) {
		t.Errorf("seeds 1234 and 1235 give the same tokens %v", g1.Tokens)
	}
	t.Logf("seed 1234: %d blocks, %d steps, %s: %v", g1.Blocks, g1.Steps, g1.StopReason, g1.Tokens)
}
