package check

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

// Defaults and bounds of the options of Bench and Verify (dgq bench, dgq
// verify). Bounds that follow from the model (positions, canvas) are read
// from the pack's config before any weight (session.ReadSpec).
const (
	BenchPromptLen = 1024 // dgq bench --prompt-len
	BenchReps      = 5    // dgq bench --reps
	// MaxBenchReps bounds --reps: each repetition is a timed prefill and
	// step.
	MaxBenchReps = 1000
	// MaxVerifyWindows bounds --windows: every window's ids are drawn
	// before the first is measured, and each costs noise rates × 2
	// denoising forwards of both models.
	MaxVerifyWindows = 4096
	// MaxVerifyGenerations bounds --generations.
	MaxVerifyGenerations = 1024
	// MaxNoiseRates bounds the count of --noise-rates.
	MaxNoiseRates = 64
)

// check refuses the options out of range before any weight is read
// (every number: --workers, --reps, --prompt-len, --canvas, the positions
// they make against the model's) and fills what follows from the pack:
// Canvas when 0, and Load.Workload for the memory estimate.
func (o *BenchOptions) check(dir string) error {
	if err := limits.First(nil,
		o.Load.Validate(),
		limits.Min("--reps", o.Reps, 1),
		limits.Max("--reps", o.Reps, MaxBenchReps, fmt.Sprintf("the maximum of %d repetitions", MaxBenchReps)),
		limits.Min("--prompt-len", o.PromptLen, 1),
	); err != nil {
		return err
	}
	spec, err := session.ReadSpec(dir)
	if err != nil {
		return err
	}
	if err := spec.CheckCanvas("--canvas", o.Canvas); err != nil {
		return err
	}
	o.Canvas = cmp.Or(o.Canvas, spec.Config.CanvasLength)
	P, C := o.PromptLen, o.Canvas
	if err := spec.CheckPositions("--prompt-len", P, P+C, fmt.Sprintf("with a canvas of %d", C)); err != nil {
		return err
	}
	o.Load.Workload = &session.Workload{Prefill: P, Canvas: C, Positions: P + C, Host: 8 * int64(P+C)}
	return nil
}

// checkSpec refuses the options the model bounds (the canvas, the
// positions of a window and of a generation), fills Canvas when 0, and
// sets Load.Workload: both models, the windows' ids.
func (o *VerifyOptions) checkSpec(spec *session.Spec) error {
	if err := limits.First(ErrVerifyOptions, spec.CheckCanvas("--canvas", o.Canvas)); err != nil {
		return err
	}
	o.Canvas = cmp.Or(o.Canvas, spec.Config.CanvasLength)
	P, C := o.Prefix, o.Canvas
	w := &session.Workload{Prefill: P, Canvas: C, Positions: P + C, Source: true, Host: 16 * int64(o.Windows) * int64(P+C)}
	check := []error{spec.CheckPositions("--prompt-len", P, P+C, fmt.Sprintf("with a canvas of %d", C))}
	if o.Generations > 0 {
		n := cmp.Or(o.GenTokens, spec.Config.CanvasLength)
		check = append(check, spec.CheckPositions("--max-new-tokens", n, P+spec.Blocks(n),
			fmt.Sprintf("after the %d-token prefix, in whole blocks of %d", P, spec.Config.CanvasLength)))
		w.Positions, w.Step = max(w.Positions, P+spec.Blocks(n)), spec.Config.CanvasLength
	}
	if err := limits.First(ErrVerifyOptions, check...); err != nil {
		return err
	}
	o.Load.Workload = w
	return nil
}

// checkNumbers refuses the options out of range that need no pack: every
// number against its generic bound.
func (o *VerifyOptions) checkNumbers() error {
	errs := []error{
		o.Load.Validate(),
		limits.Min("--windows", o.Windows, 1),
		limits.Max("--windows", o.Windows, MaxVerifyWindows, fmt.Sprintf("the maximum of %d windows", MaxVerifyWindows)),
		limits.Min("--prompt-len", o.Prefix, 1),
		limits.NonNegative("--canvas", o.Canvas, "0 is the model's canvas_length"),
		limits.Max("--generations", o.Generations, MaxVerifyGenerations, fmt.Sprintf("the maximum of %d generations", MaxVerifyGenerations)),
		limits.NonNegative("--max-new-tokens", o.GenTokens, "0 is one canvas"),
		limits.NonNegative("--max-steps", o.GenSteps, "0 takes the generation config's max_denoising_steps"),
		limits.Max("--max-steps", o.GenSteps, generate.MaxGenSteps, fmt.Sprintf("the maximum of %d steps per block", generate.MaxGenSteps)),
	}
	if n := len(o.NoiseRates); n > MaxNoiseRates {
		errs = append(errs, limits.Errorf("--noise-rates", fmt.Sprintf("(%d rates)", n), "exceeds the maximum of %d rates", MaxNoiseRates))
	}
	if len(o.NoiseRates) == 0 {
		errs = append(errs, limits.Errorf("--noise-rates", "(none)", "must hold at least one rate in (0, 1]"))
	}
	for _, r := range o.NoiseRates {
		if !(r > 0 && r <= 1) {
			list := make([]string, len(o.NoiseRates))
			for i, r := range o.NoiseRates {
				list[i] = strconv.FormatFloat(r, 'g', -1, 64)
			}
			errs = append(errs, limits.Errorf("--noise-rates", strings.Join(list, ","), "holds noise rate %g, not a fraction in (0, 1]", r))
			break
		}
	}
	return limits.First(ErrVerifyOptions, errs...)
}

// smokeLoad checks the numbers of Smoke's options before the pack is
// loaded and sets o.Load.Workload to the battery's (a prefix-sized prompt,
// the canvas, one generated block; with the pack's bf16 source when it is
// at hand, for the verify check) for the memory estimate.
func smokeLoad(dir string, o *SmokeOptions) error {
	if err := o.Load.Validate(); err != nil {
		return err
	}
	spec, err := session.ReadSpec(dir)
	if err != nil {
		return err
	}
	_, srcErr := resolveVerifySource(spec.Manifest, "")
	C := spec.Config.CanvasLength
	P := max(min(VerifyPrefix, spec.MaxPositions()-2*C), 1)
	o.Load.Workload = &session.Workload{Prefill: P, Canvas: C, Positions: P + 2*C, Step: C, Source: srcErr == nil}
	return nil
}

// parityWorkload is the workload of Parity's scenarios for the memory
// estimate: the reference's prompt, two canvases after it and a committed
// block, the reference's tensors held on the host. It reads only the
// pack's config and the reference's sizes; whatever it cannot read is
// left to Parity to refuse.
func parityWorkload(dir, reference string) *session.Workload {
	spec, err := session.ReadSpec(dir)
	if err != nil {
		return nil
	}
	C := spec.Config.CanvasLength
	w := &session.Workload{Prefill: C, Canvas: C, Positions: 3 * C}
	if meta, tensors, err := referencePaths(reference); err == nil {
		if raw, err := readCapped(meta, 1<<20); err == nil {
			var m refMeta
			if json.Unmarshal(raw, &m) == nil && m.PromptLen > 0 && m.PromptLen <= spec.MaxPositions() {
				w.Prefill, w.Positions = m.PromptLen, m.PromptLen+2*C
			}
		}
		if st, err := os.Stat(tensors); err == nil {
			w.Host = min(st.Size(), maxReferenceBytes)
		}
	}
	return w
}
