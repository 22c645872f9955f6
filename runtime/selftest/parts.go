package selftest

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/conformance"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
)

// maxMessages is how many messages of one failed test a report keeps.
const maxMessages = 3

// ConformanceResult counts the conformance suite's tests.
type ConformanceResult struct {
	// Tests counts the suite's leaf tests and Failed those that failed.
	Tests  int `json:"tests"`
	Failed int `json:"failed"`
	// Small: the suite ran its small shapes (Options.Quick).
	Small bool `json:"small"`
	// Precision is the backend's precision the suite ran at (its contracts
	// are f32's: a bf16 run's suite runs on the same backend at f32).
	Precision string `json:"precision"`
}

// conformance runs the conformance suite on the backend, with the options
// its Caps give.
func (r *runner) conformance(ctx context.Context) (Part, error) {
	p := Part{Name: "conformance"}
	b := r.b
	if r.o.Precision != backend.F32 {
		fb, err := backend.Open(r.o.Backend, backend.Config{Precision: backend.F32, Workers: r.o.Workers})
		if err != nil {
			return p, err
		}
		defer fb.Close()
		b = fb
	}
	r.progress.Start("conformance", int64(len(conformance.Ops())))
	rec := conformance.NewRecorder(func(res conformance.Result) {
		if strings.Count(res.Name, "/") == 1 {
			r.progress.Add(1)
		}
	})
	rec.Run("conformance", func(t conformance.T) { conformance.RunOpts(t, b, conformance.OptionsFor(b.Caps(), r.o.Quick)) })
	r.progress.Finish()
	res := rec.Results()
	c := &ConformanceResult{Small: r.o.Quick, Precision: backend.F32}
	for i, t := range res {
		if i+1 < len(res) && strings.HasPrefix(res[i+1].Name, t.Name+"/") {
			continue // a parent: its subtests are counted
		}
		if t.Name == "conformance" {
			continue
		}
		c.Tests++
		if t.Failed {
			c.Failed++
			for j, m := range t.Messages {
				if j == maxMessages {
					p.Failures = append(p.Failures, fmt.Sprintf("%s: (%d more)", t.Name, len(t.Messages)-maxMessages))
					break
				}
				p.Failures = append(p.Failures, t.Name+": "+oneLine(m))
			}
		}
	}
	if len(res) > 0 && res[0].Failed && c.Failed == 0 { // a failure of the suite itself (Sync)
		c.Failed++
		for _, m := range res[0].Messages {
			p.Failures = append(p.Failures, "conformance: "+oneLine(m))
		}
	}
	p.Conformance = c
	p.Pass = c.Tests > 0 && c.Failed == 0
	shapes := "every shape"
	if r.o.Quick {
		shapes = "small shapes"
	}
	p.Summary = fmt.Sprintf("%d of %d tests passed (%s, f32)", c.Tests-c.Failed, c.Tests, shapes)
	return p, ctx.Err()
}

// kernels compiles every kernel the backend may launch.
func (r *runner) kernels(ctx context.Context) (Part, error) {
	p := Part{Name: "kernels"}
	r.progress.Start("kernels", 1)
	rep, err := r.b.(backend.KernelReporter).KernelReport(ctx)
	r.progress.Finish()
	if err != nil {
		return p, err
	}
	p.Kernels = rep
	warned := 0
	for _, u := range rep.Units {
		if u.Log != "" {
			warned++
		}
		if u.Error != "" {
			p.Failures = append(p.Failures, u.Name+": "+oneLine(u.Error))
		}
		for _, k := range u.Kernels {
			if k.Error != "" {
				p.Failures = append(p.Failures, u.Name+" "+k.Name+": "+oneLine(k.Error))
			}
		}
	}
	p.Pass = rep.Failed() == 0 && rep.Kernels() > 0
	p.Summary = fmt.Sprintf("%d kernels in %d units compiled, %d failed; %d units with compiler output", rep.Kernels(), len(rep.Units), rep.Failed(), warned)
	return p, nil
}

// arithmetic probes the backend's f32 arithmetic.
func (r *runner) arithmetic(ctx context.Context) (Part, error) {
	p := Part{Name: "arithmetic"}
	a, err := r.b.(backend.ArithmeticProber).ProbeArithmetic()
	if err != nil {
		return p, err
	}
	p.Arithmetic, p.Pass, p.Summary = a, a.Exact(), a.String()
	if !a.Exact() {
		p.Failures = append(p.Failures, "the bit-exact ops need products rounded to nearest even one at a time (MUL_RN, ADD_RN) and fused FMA: "+a.String())
	}
	return p, ctx.Err()
}

// ParityResult is one pack's parity run.
type ParityResult struct {
	Profile string `json:"profile"`
	// Pass is true for a judged pass, false for a failure, nil (null) when
	// the run had no verdict.
	Pass *bool `json:"pass"`
	// Judged: the pack was held to the reference's bounds (its weights are
	// the reference's); NoVerdict says why not. A GPU backend's run is
	// also held to the CPU backend's (VsCPU).
	Judged    bool         `json:"judged"`
	NoVerdict string       `json:"no_verdict,omitempty"`
	Anchor    string       `json:"anchor"`
	Cases     []ParityCase `json:"cases"`
}

// ParityCase is one tensor of a ParityResult (check.ParityCase).
type ParityCase struct {
	Name string `json:"name"`
	// MaxAbsErr is null when the error is not a finite number (a NaN or
	// infinity in the backend's output, a tensor of the wrong length).
	MaxAbsErr *float64 `json:"max_abs_err"`
	Tolerance *float64 `json:"tolerance,omitempty"`
	// VsCPU is absent on the CPU backend and when not finite.
	VsCPU *float64 `json:"max_abs_vs_cpu,omitempty"`
	// Pass is nil (null) when the case was held to no bound (Judged false:
	// check.ParityCase.Judged).
	Pass   *bool `json:"pass"`
	Judged bool  `json:"judged"`
}

// parityProfiles are the packs the parity part quantizes: the bf16 pack
// (whose weights are the reference's), and on a GPU backend in a full f32
// run the q4 and nvfp4 packs too (compared with the CPU backend; in bf16
// precision nothing bounds that comparison).
func (r *runner) parityProfiles() []string {
	if r.o.Quick || r.b.Name() == "cpu" || r.o.Precision != backend.F32 {
		return []string{"bf16"}
	}
	return []string{"bf16", "q4", "nvfp4"}
}

// parity runs the embedded checkpoint's reference scenarios on the backend.
func (r *runner) parity(ctx context.Context) (Part, error) {
	p := Part{Name: "parity", Pass: true}
	profiles := r.parityProfiles()
	r.progress.Start("parity", int64(len(profiles)))
	defer r.progress.Finish()
	bounds := check.DefaultBounds()
	if r.o.Precision == backend.BF16 {
		bounds.VsCPU, bounds.BF16 = check.VsCPUBF16, true
	}
	var worst float64
	for _, profile := range profiles {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		res, verdict, err := r.parityOf(ctx, profile, bounds)
		if err != nil {
			return p, err
		}
		p.Parity = append(p.Parity, *res)
		p.Pass = p.Pass && res.Pass != nil && *res.Pass
		for _, c := range res.Cases {
			if c.VsCPU != nil {
				worst = math.Max(worst, *c.VsCPU)
			}
			if c.Pass != nil && !*c.Pass {
				errText := "not finite"
				if c.MaxAbsErr != nil {
					errText = fmt.Sprintf("%.3g", *c.MaxAbsErr)
				}
				p.Failures = append(p.Failures, fmt.Sprintf("%s pack, %s: max abs error %s, tolerance %s", profile, c.Name, errText, orInf(c.Tolerance)))
			}
		}
		if !verdict {
			p.NoVerdict = strings.TrimPrefix(p.NoVerdict+"; ", "; ") + fmt.Sprintf("%s pack: %s", profile, res.NoVerdict)
		}
		r.progress.Add(1)
	}
	if len(p.Failures) > 0 {
		p.NoVerdict = "" // a failure is a verdict
	}
	p.Summary = fmt.Sprintf("%s of the embedded checkpoint against transformers' reference", plural(len(profiles), "pack")+" ("+strings.Join(profiles, ", ")+")")
	switch {
	case r.b.Name() == "cpu":
	case math.IsInf(bounds.VsCPU, 1):
		p.Summary += fmt.Sprintf("; largest difference from the CPU backend %.3g (reported: in bf16 precision the bound is on the distance to transformers' own bfloat16 error)", worst)
	default:
		p.Summary += fmt.Sprintf(" and the CPU backend (largest difference %.3g, bound %.3g)", worst, bounds.VsCPU)
	}
	return p, nil
}

// parityOf runs one pack's parity. verdict reports that the run could be
// judged: against the reference (the bf16 pack), or against the CPU backend
// (another backend's quantized packs, in f32); a run without one fails.
func (r *runner) parityOf(ctx context.Context, profile string, bounds check.Bounds) (res *ParityResult, verdict bool, err error) {
	e, done, err := r.engine(ctx, profile)
	if err != nil {
		return nil, false, err
	}
	defer done()
	rep, err := check.Parity(ctx, e, r.ref, bounds)
	if err != nil {
		return nil, false, err
	}
	res = &ParityResult{Profile: profile, Judged: rep.Judged, NoVerdict: rep.NoVerdict, Anchor: rep.Anchor}
	vsCPU := r.b.Name() != "cpu" && !math.IsInf(bounds.VsCPU, 1)
	verdict = rep.Judged || vsCPU && profile != "bf16"
	failed := rep.Verdict && !rep.Pass
	if verdict || failed {
		pass := rep.Pass && verdict
		res.Pass = &pass
	}
	verdict = verdict || failed
	for _, c := range rep.Cases {
		pc := ParityCase{Name: c.Name, MaxAbsErr: finite(c.MaxAbsErr), Tolerance: finite(c.Tolerance), Judged: c.Judged}
		if c.Judged {
			pass := c.Pass
			pc.Pass = &pass
		}
		if c.VsCPU >= 0 {
			pc.VsCPU = finite(c.VsCPU)
		}
		res.Cases = append(res.Cases, pc)
	}
	return res, verdict, nil
}

// LockstepResult is one seeded generation in lockstep with the CPU.
type LockstepResult struct {
	Seed           uint64 `json:"seed"`
	Pass           bool   `json:"pass"`
	Steps          int    `json:"steps"`
	Positions      int    `json:"positions"`
	RoutesCompared bool   `json:"routes_compared"`
	Rerouted       int    `json:"rerouted"`
	Disturbed      int    `json:"disturbed"`
	// Compared counts the positions neither rerouted nor disturbed, whose
	// logits were held to the precision's tolerance (the others are
	// explained by their routing, itself checked against the margins).
	Compared     int     `json:"compared"`
	MaxLogitDiff float64 `json:"max_logit_diff"`
	Argmax       int     `json:"argmax_flips"`
	Draw         int     `json:"draw_flips"`
	Mask         int     `json:"mask_flips"`
	Unexplained  int     `json:"unexplained"`
}

// lockstepPrompt is a prompt of the tiny checkpoint's vocabulary.
var lockstepPrompt = []int{2, 17, 33, 5, 90, 41, 7, 64, 12, 3, 99, 100, 101, 8}

// lockstepRuns are the generations: the first alone in a quick run.
var lockstepRuns = []generate.Options{
	{Seed: 7, MaxNewTokens: 40, MaxSteps: 6, FirstStepSC: true},
	{Seed: 3, MaxNewTokens: 16, ArgmaxAccept: true, PlateauStop: true},
}

// lockstep generates on the backend in lockstep with the CPU backend.
func (r *runner) lockstep(ctx context.Context) (Part, error) {
	p := Part{Name: "lockstep", Pass: true}
	runs := lockstepRuns
	if r.o.Quick {
		runs = runs[:1]
	}
	e, done, err := r.engine(ctx, "bf16")
	if err != nil {
		return p, err
	}
	defer done()
	tol, err := r.lockstepTol(ctx, e)
	if err != nil {
		p.Pass, p.NoVerdict = false, oneLine(err.Error())
		p.Summary = "no verdict: " + p.NoVerdict
		return p, nil
	}
	r.progress.Start("lockstep", int64(len(runs)))
	defer r.progress.Finish()
	unexplained, compared, positions := 0, 0, 0
	for _, o := range runs {
		rep, err := check.GenerateLockstep(ctx, e, lockstepPrompt, nil, o, tol)
		if err != nil {
			return p, err
		}
		res := LockstepResult{Seed: o.Seed, Steps: rep.Steps, Positions: rep.Positions, RoutesCompared: rep.RoutesCompared,
			Rerouted: rep.Rerouted, Disturbed: rep.Disturbed, Compared: rep.Positions - rep.Rerouted - rep.Disturbed,
			MaxLogitDiff: rep.MaxLogitDiff, Argmax: rep.Argmax, Draw: rep.Draw, Mask: rep.Mask, Unexplained: rep.Unexplained()}
		res.Pass = rep.Steps > 0 && rep.RoutesCompared && res.Unexplained == 0
		if !res.Pass {
			p.Failures = append(p.Failures, fmt.Sprintf("seed %d: %d steps, routes compared %v, %d differences unexplained", o.Seed, rep.Steps, rep.RoutesCompared, res.Unexplained))
		}
		unexplained += res.Unexplained
		compared += res.Compared
		positions += res.Positions
		p.Lockstep = append(p.Lockstep, res)
		p.Pass = p.Pass && res.Pass
		r.progress.Add(1)
	}
	p.Summary = fmt.Sprintf("%s beside the CPU backend, %d differences unexplained; %d of %d positions routed alike and compared (logits within %.3g, router margins within %.3g)",
		plural(len(runs), "seeded generation"), unexplained, compared, positions, tol.Logit, tol.Router)
	return p, nil
}

// lockstepTol is the precision's lockstep tolerances: f32's
// (check.LockstepF32), or bf16's, derived from transformers' bfloat16
// results on the embedded checkpoint through the bf16 pack's parity in
// bf16 precision (check.LockstepBF16).
func (r *runner) lockstepTol(ctx context.Context, e *model.Engine) (check.LockstepTol, error) {
	if r.o.Precision == backend.F32 {
		return check.LockstepF32(), nil
	}
	b := check.DefaultBounds()
	b.VsCPU, b.BF16 = check.VsCPUBF16, true
	rep, err := check.Parity(ctx, e, r.ref, b)
	if err != nil {
		return check.LockstepTol{}, err
	}
	return check.LockstepBF16(rep, r.ref)
}

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orInf(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%.3g", *v)
}

// plural is "1 pack", "3 packs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// finite returns a pointer to v, or nil when v is a NaN or an infinity
// (which JSON cannot hold).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
