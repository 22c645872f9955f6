package check

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/session"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Load      session.Options
	PromptLen int    // tokens prefilled: ≥ 1, with Canvas within the model's positions (dgq bench: BenchPromptLen)
	Canvas    int    // canvas positions of a denoising step, up to the config's canvas_length (0: that)
	Reps      int    // timed repetitions after one warm-up: 1…MaxBenchReps (dgq bench: BenchReps)
	Seed      uint64 // seeds the random ids
	// Profile adds, after the timings, one prefill and one step on a GPU
	// backend with every op synchronized and timed (BenchReport.Profile).
	Profile bool
	// Steps, when not nil, is told each timed operation's repetitions as
	// they run (a progress bar on a terminal).
	Steps dgq.Progress
}

// BenchTiming is one measured operation: wall-clock milliseconds of each
// repetition, synchronized with the backend at both ends.
type BenchTiming struct {
	What   string    `json:"what"`
	Tokens int       `json:"tokens"`
	Ms     []float64 `json:"ms"`
	Median float64   `json:"ms_median"`
	Min    float64   `json:"ms_min"`
	Max    float64   `json:"ms_max"`
	TokS   float64   `json:"tok_per_s"` // tokens / median
}

// BenchReport is the result of Bench.
type BenchReport struct {
	Backend     string  `json:"backend"`
	Precision   string  `json:"precision"`
	Device      string  `json:"device"`
	Layers      int     `json:"layers"`
	WeightBytes int64   `json:"weight_bytes"`
	LoadSeconds float64 `json:"load_s"`
	// UploadSeconds is the part of LoadSeconds spent putting every weight
	// on the backend in its preferred layout (a GPU re-lays the pack's
	// blocks as it uploads them); 0 on the CPU.
	UploadSeconds float64 `json:"upload_s"`
	// Kernels is the backend's choice of kernel per op (Caps.Kernels).
	Kernels map[string]string `json:"kernels,omitempty"`
	Timings []BenchTiming     `json:"timings"`
	// Profile holds, per timed operation, each backend op's total time in
	// one synchronized run (BenchOptions.Profile).
	Profile map[string][]backend.OpTime `json:"profile,omitempty"`
}

// Bench loads the pack at dir on the backend o.Load names and times (1) a
// prefill of PromptLen random tokens into an empty cache and (2) one
// generation step — the denoising forward over Canvas random positions at
// context PromptLen, self-conditioned on the previous step's logits, then
// temper, entropy, argmax and categorical draws, with the per-position
// results back on the host — as Generate runs it.
func Bench(ctx context.Context, dir string, o BenchOptions) (*BenchReport, error) {
	if err := o.check(dir); err != nil { // before anything is loaded
		return nil, err
	}
	t0 := time.Now()
	o.Load.Profile = o.Profile && o.Load.Backend != "" && o.Load.Backend != "cpu"
	s, err := session.Load(ctx, dir, o.Load)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m, be := s.Model, s.Engine.Backend()
	if o.Canvas <= 0 {
		o.Canvas = m.Config().CanvasLength
	}
	rep := &BenchReport{Backend: be.Name(), Precision: cmp.Or(o.Load.Precision, backend.F32),
		Device: be.Caps().Device, Kernels: be.Caps().Kernels, Layers: m.Layers()}
	for _, t := range s.Pack.Manifest.Tensors {
		rep.WeightBytes += t.Size
	}
	st := generate.NewStepper(s.Engine)
	defer st.Close() // an interrupted run too: the cache is freed before the session
	sync := be.Sync
	if err := sync(); err != nil {
		return nil, err
	}
	rep.LoadSeconds = time.Since(t0).Seconds()
	rep.UploadSeconds = s.UploadSeconds

	rng := rand.New(rand.NewPCG(o.Seed, 0x62656e6368))
	ids := func(n int) []int {
		v := make([]int, n)
		for i := range v {
			v[i] = 3 + rng.IntN(m.Vocab()-3)
		}
		return v
	}
	prompt := ids(o.PromptLen)
	timed := func(what string, tokens int, run func() error) error {
		t := BenchTiming{What: what, Tokens: tokens}
		steps := dgq.ProgressOrNop(o.Steps)
		steps.Start(what, int64(o.Reps+1))
		defer steps.Finish()
		for r := 0; r <= o.Reps; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			start := time.Now()
			if err := run(); err != nil {
				return fmt.Errorf("check: bench %s: %w", what, err)
			}
			if err := sync(); err != nil {
				return err
			}
			if r > 0 { // the first is the warm-up
				t.Ms = append(t.Ms, float64(time.Since(start).Microseconds())/1000)
			}
			steps.Add(1)
		}
		sorted := slices.Sorted(slices.Values(t.Ms))
		t.Median, t.Min, t.Max = sorted[len(sorted)/2], sorted[0], sorted[len(sorted)-1]
		t.TokS = float64(tokens) / t.Median * 1000
		rep.Timings = append(rep.Timings, t)
		return nil
	}
	err = timed("prefill", o.PromptLen, func() error {
		if err := st.Start(); err != nil {
			return err
		}
		return st.Prefill(ctx, prompt)
	})
	if err != nil {
		return nil, err
	}
	C := o.Canvas
	canvas := ids(C)
	us := make([]float64, C)
	for i := range us {
		us[i] = rng.Float64()
	}
	out := model.StepStats{Entropy: make([]float32, C), Argmax: make([]int, C), Draw: make([]int, C)}
	if err := st.Step(ctx, canvas, generate.SCNone, 0.8, us, out); err != nil {
		return nil, err
	}
	step := func() error { return st.Step(ctx, canvas, generate.SCPrev, 0.8, us, out) }
	err = timed("denoise_step", C, step)
	if err == nil {
		if p, ok := be.(*backend.Profiled); ok {
			rep.Profile = map[string][]backend.OpTime{}
			for _, run := range []struct {
				what string
				f    func() error
			}{{"denoise_step", step}, {"prefill", func() error {
				if err := st.Start(); err != nil {
					return err
				}
				return st.Prefill(ctx, prompt)
			}}} {
				p.Start()
				err = run.f()
				p.Stop()
				if err != nil {
					break
				}
				rep.Profile[run.what] = p.Times()
			}
		}
	}
	st.Close()
	if err != nil {
		return nil, err
	}
	return rep, nil
}
