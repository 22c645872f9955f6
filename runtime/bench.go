package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Load      LoadOptions
	PromptLen int    // tokens prefilled (default 1024)
	Canvas    int    // canvas positions of a denoising step (default: the config's canvas_length)
	Reps      int    // timed repetitions after one warm-up (default 5)
	Seed      uint64 // seeds the random ids
	// Profile adds, after the timings, one prefill and one step on a GPU
	// backend with every op synchronized and timed (BenchReport.Profile).
	Profile bool
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
	Profile map[string][]OpTime `json:"profile,omitempty"`
}

// Bench loads the pack at dir on the backend o.Load names and times (1) a
// prefill of PromptLen random tokens into an empty cache and (2) one
// generation step — the denoising forward over Canvas random positions at
// context PromptLen, self-conditioned on the previous step's logits, then
// temper, entropy, argmax and categorical draws, with the per-position
// results back on the host — as Generate runs it.
func Bench(ctx context.Context, dir string, o BenchOptions) (*BenchReport, error) {
	if o.PromptLen <= 0 {
		o.PromptLen = 1024
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	t0 := time.Now()
	o.Load.profile = o.Profile && o.Load.Backend != "" && o.Load.Backend != "cpu"
	s, err := Load(dir, o.Load)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m := s.Model
	if o.Canvas <= 0 {
		o.Canvas = m.cfg.CanvasLength
	}
	rep := &BenchReport{Backend: "cpu", Precision: "f32", Device: "host", Layers: len(m.dec)}
	if o.Load.Precision != "" {
		rep.Precision = o.Load.Precision
	}
	for _, t := range s.Pack.Manifest.Tensors {
		rep.WeightBytes += t.Size
	}
	var st stepper = newLogitStepper(m)
	sync := func() error { return nil }
	if s.Engine != nil {
		rep.Backend, rep.Device = s.Engine.b.Name(), s.Engine.b.Caps().Device
		rep.Kernels = s.Engine.b.Caps().Kernels
		st = &engineStepper{e: s.Engine}
		sync = s.Engine.b.Sync
	}
	if err := sync(); err != nil {
		return nil, err
	}
	rep.LoadSeconds = time.Since(t0).Seconds()
	rep.UploadSeconds = s.UploadSeconds

	rng := rand.New(rand.NewPCG(o.Seed, 0x62656e6368))
	ids := func(n int) []int {
		v := make([]int, n)
		for i := range v {
			v[i] = 3 + rng.IntN(m.vocab-3)
		}
		return v
	}
	prompt := ids(o.PromptLen)
	timed := func(what string, tokens int, run func() error) error {
		t := BenchTiming{What: what, Tokens: tokens}
		for r := 0; r <= o.Reps; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			start := time.Now()
			if err := run(); err != nil {
				return fmt.Errorf("runtime: bench %s: %w", what, err)
			}
			if err := sync(); err != nil {
				return err
			}
			if r > 0 { // the first is the warm-up
				t.Ms = append(t.Ms, float64(time.Since(start).Microseconds())/1000)
			}
		}
		sorted := slices.Sorted(slices.Values(t.Ms))
		t.Median, t.Min, t.Max = sorted[len(sorted)/2], sorted[0], sorted[len(sorted)-1]
		t.TokS = float64(tokens) / t.Median * 1000
		rep.Timings = append(rep.Timings, t)
		return nil
	}
	err = timed("prefill", o.PromptLen, func() error {
		st.close()
		if err := st.start(); err != nil {
			return err
		}
		return st.prefill(prompt)
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
	ent, amax := make([]float32, C), make([]int, C)
	if _, err := st.step(canvas, scNone, 0.8, us, ent, amax); err != nil {
		return nil, err
	}
	step := func() error {
		_, err := st.step(canvas, scPrev, 0.8, us, ent, amax)
		return err
	}
	err = timed("denoise_step", C, step)
	if err == nil && s.Engine != nil {
		if p, ok := s.Engine.b.(*ProfiledBackend); ok {
			rep.Profile = map[string][]OpTime{}
			for _, run := range []struct {
				what string
				f    func() error
			}{{"denoise_step", step}, {"prefill", func() error {
				st.close()
				if err := st.start(); err != nil {
					return err
				}
				return st.prefill(prompt)
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
	st.close()
	if err != nil {
		return nil, err
	}
	return rep, nil
}
