package check

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
)

// LockstepReport compares, step by step, a generation on an Engine with a
// CPU engine of the same model fed the very same inputs: each step the CPU
// denoises the canvas the engine denoised, self-conditioned on the same
// logits (the engine's tempered logits of the previous step), and tempers
// and samples with the same temperature and uniforms, so each step's
// differences are that step's alone (self-conditioning feeds a step's
// logits into the next and amplifies a difference from step to step: two
// whole generations part within a few steps however close the arithmetic).
// The generation follows the engine.
//
// Every difference is explained or counted as unexplained:
//
//   - Routing. Where the engine's backend reports its routing
//     (backend.RouteRecorder: CPU, CUDA), a position is rerouted when the
//     engine chose another expert set than the CPU for it in some layer of
//     the step. A rerouted position's output changes wholesale, and
//     attention carries the change to every other position of the canvas
//     in the later layers, so when a step reroutes any position, or
//     follows a prefill that routed some token differently (its KV rows
//     differ), all its positions are disturbed. Only the first layer that
//     reroutes in an undisturbed forward holds the cause: its flips are
//     explained when the CPU's selection margin there is within
//     LockstepTol.Router (else UnexplainedRoutes); later flips are its
//     consequences. Without reports from the engine, positions whose CPU
//     margin is within LockstepTol.Router count as rerouted.
//   - Logits. An undisturbed position is explained when its largest logit
//     difference (the tempered logits' δ times the step's temperature) is
//     within LockstepTol.Logit (the precision's documented noise);
//     UnexplainedRows counts the others.
//   - Decisions. A differing argmax is consistent with its row when the
//     CPU's logits of the two indices are within 2δ (each moved by at most
//     δ); a differing draw when the CPU's cumulative probability at a
//     boundary between the two indices is within tanh(δ/2) of the target u
//     (the most a cumulative probability moves when every logit moves by at
//     most δ), plus the float32 summation error of a cumulative sum over
//     the vocabulary, V·2⁻²⁴. A differing decision is unexplained when it is
//     inconsistent with its row (a sampler bug) or its row is unexplained.
//     An accept-mask difference is explained when the step rerouted a
//     position or the CPU's mask margin is within twice the step's largest
//     entropy difference.
type LockstepReport struct {
	Generation *generate.Generation
	Steps      int
	Positions  int // positions compared (steps × canvas)
	// RoutesCompared reports that the engine's backend reported its
	// routing, so Rerouted counts actual routing differences.
	RoutesCompared bool
	// Rerouted counts the rerouted positions and Disturbed the other
	// positions of disturbed steps (see above); CauseFlips counts the
	// routing flips of the first rerouting layer of undisturbed forwards,
	// RerouteMargin is the largest CPU selection margin among them (0 when
	// none), and UnexplainedRoutes counts those beyond LockstepTol.Router.
	Rerouted, Disturbed int
	CauseFlips          int
	RerouteMargin       float64
	UnexplainedRoutes   int
	// MaxEntropyDiff is the largest |entropy_engine − entropy_cpu| (nats)
	// and MaxLogitDiff the largest logit difference (untempered), both over
	// undisturbed positions; UnexplainedRows counts those whose logit
	// difference exceeds LockstepTol.Logit.
	MaxEntropyDiff, MaxLogitDiff float64
	UnexplainedRows              int
	// Argmax, Draw and Mask count positions whose argmax, categorical draw or
	// accept decision differ, and the Unexplained ones those not explained.
	Argmax, Draw, Mask                                  int
	UnexplainedArgmax, UnexplainedDraw, UnexplainedMask int
	// PerStep holds each step's largest tempered-logit and entropy
	// differences, its flips (argmax + draw + mask) and rerouted positions,
	// and the CPU router's smallest selection margin.
	PerStep []LockstepStep
}

// Unexplained is the number of unexplained differences of every kind.
func (r *LockstepReport) Unexplained() int {
	return r.UnexplainedRoutes + r.UnexplainedRows + r.UnexplainedArgmax + r.UnexplainedDraw + r.UnexplainedMask
}

// LockstepStep is one step of a LockstepReport.
type LockstepStep struct {
	LogitDiff, EntropyDiff float64
	Flips, Rerouted        int
	RouterGap              float64
}

// LockstepTol are the bounds the lockstep explains differences by.
type LockstepTol struct {
	// Logit bounds the largest logit difference (untempered) of an
	// undisturbed position.
	Logit float64
	// Router is the CPU selection margin within which the engine may route
	// a token otherwise.
	Router float64
}

// LockstepF32 is the tolerance of f32 arithmetic against the CPU's
// float64 sums: logits within 2e-2 (the random-weight fixtures amplify
// rounding; transformers' own float32 logits are up to 2.4e-2 from its
// float64 ones on them, docs/runtime.md) and routing flips only at CPU
// margins within 1e-4 (MODEL_SPEC §5.3's near tie).
func LockstepF32() LockstepTol { return LockstepTol{Logit: 2e-2, Router: 1e-4} }

// GenerateLockstep runs generate.Generate on the engine with a CPU engine
// of the same model in lockstep (LockstepReport), explaining differences
// by tol.
func GenerateLockstep(ctx context.Context, e *model.Engine, prompt []int, gc *generate.Config, o generate.Options, tol LockstepTol) (*LockstepReport, error) {
	cb := cpu.New(0)
	ce, err := model.NewEngine(e.Model(), cb)
	if err != nil {
		return nil, err
	}
	defer ce.Close()
	s := &lockstepStepper{dev: generate.NewStepper(e), cpu: generate.NewStepper(ce), devE: e, cpuE: ce, cb: cb,
		V: e.Model().Vocab(), gc: gc, tol: tol}
	s.devR, _ = e.Backend().(backend.RouteRecorder)
	s.rep.RoutesCompared = s.devR != nil
	if s.gc == nil {
		s.gc = generate.DefaultConfig()
	}
	g, err := generate.Run(ctx, e.Model().Config(), s, prompt, gc, o)
	s.rep.Generation = g
	return &s.rep, err
}

type lockstepStepper struct {
	dev, cpu   generate.Stepper
	devE, cpuE *model.Engine
	cb         *cpu.Backend          // cpuE's backend: it reports routes with margins
	devR       backend.RouteRecorder // the engine's backend, when it reports routes
	V          int
	gc         *generate.Config
	tol        LockstepTol
	rep        LockstepReport
	// prefillRerouted: the last prefill routed some token differently.
	prefillRerouted bool
}

func (s *lockstepStepper) Start() error {
	if err := s.dev.Start(); err != nil {
		return err
	}
	return s.cpu.Start()
}

func (s *lockstepStepper) Close() { s.dev.Close(); s.cpu.Close() }

// routed runs f with both backends recording their routing, and returns
// per row (rows of every MoE call) whether it was rerouted and its
// smallest CPU margin over the calls; disturbed says whether the forward
// came in disturbed (after a prefill that rerouted) and is then told
// whether any row was rerouted.
func (s *lockstepStepper) routed(rows int, disturbed *bool, f func() error) (rerouted []bool, gaps []float64, err error) {
	var rc, rd backend.Routes
	s.cb.RecordRoutes(&rc)
	defer s.cb.RecordRoutes(nil)
	if s.devR != nil {
		s.devR.RecordRoutes(&rd)
		defer s.devR.RecordRoutes(nil)
	}
	if err := f(); err != nil {
		return nil, nil, err
	}
	rerouted, gaps = make([]bool, rows), lockstepGaps(rows)
	for k, c := range rc.Calls {
		cause := !*disturbed // the first rerouting call of an undisturbed forward
		for t := range min(rows, c.Rows) {
			gaps[t] = min(gaps[t], c.Margins[t])
			switch {
			case s.devR == nil:
				rerouted[t] = rerouted[t] || c.Margins[t] <= s.tol.Router
			case k >= len(rd.Calls) || rd.Calls[k].Rows != c.Rows || !backend.SameExperts(c.Row(t), rd.Calls[k].Row(t)):
				rerouted[t], *disturbed = true, true
				if !cause {
					continue
				}
				s.rep.CauseFlips++
				s.rep.RerouteMargin = max(s.rep.RerouteMargin, c.Margins[t])
				if c.Margins[t] > s.tol.Router {
					s.rep.UnexplainedRoutes++
				}
			}
		}
	}
	return rerouted, gaps, nil
}

func (s *lockstepStepper) Prefill(ctx context.Context, ids []int) error {
	// The engine's routes are recorded around its own prefill, the CPU's
	// around its: run them in turn inside one recording.
	disturbed := false
	rerouted, _, err := s.routed(len(ids), &disturbed, func() error {
		if err := s.dev.Prefill(ctx, ids); err != nil {
			return err
		}
		return s.cpu.Prefill(ctx, ids)
	})
	if err != nil {
		return err
	}
	s.prefillRerouted = slices.Contains(rerouted, true)
	return nil
}

func (s *lockstepStepper) Step(ctx context.Context, canvas []int, sc generate.SC, T float32, us []float64, out model.StepStats) error {
	C, V := len(canvas), s.V
	if sc == generate.SCPrev {
		// The same self-conditioning input on both sides: the engine's
		// tempered logits of the previous step, which it is about to read.
		zd := make([]float32, C*V)
		if err := s.devE.Logits(zd); err != nil {
			return err
		}
		if err := s.cpuE.SetLogits(zd); err != nil {
			return err
		}
	}
	outC := model.StepStats{Entropy: make([]float32, C), Argmax: make([]int, C), Draw: make([]int, C)}
	disturbed := s.prefillRerouted
	rerouted, gaps, err := s.routed(C, &disturbed, func() error {
		if err := s.dev.Step(ctx, canvas, sc, T, us, out); err != nil {
			return err
		}
		return s.cpu.Step(ctx, canvas, sc, T, us, outC)
	})
	if err != nil {
		return err
	}
	z, zd := make([]float32, C*V), make([]float32, C*V) // this step's tempered logits
	if err := s.cpuE.Logits(z); err != nil {
		return err
	}
	if err := s.devE.Logits(zd); err != nil {
		return err
	}
	s.compare(z, zd, T, rerouted, disturbed, gaps, us, out, outC)
	return nil
}

// compare classifies one step's differences between the engine (out, its
// tempered logits zd) and the CPU (outC, z) at temperature T; rerouted
// marks the rerouted positions, disturbed the step, gaps are the CPU's
// router margins.
func (s *lockstepStepper) compare(z, zd []float32, T float32, rerouted []bool, disturbed bool, gaps, us []float64, out, outC model.StepStats) {
	C, V := len(gaps), s.V
	r := &s.rep
	r.Steps++
	r.Positions += C
	st := LockstepStep{RouterGap: slices.Min(gaps), LogitDiff: maxAbsDiff32(zd, z)}
	flips := r.Argmax + r.Draw + r.Mask
	sumSlop := float64(V) * 0x1p-24 // float32 cumulative sums over the vocabulary
	for i := range C {
		row, rowD := z[i*V:(i+1)*V], zd[i*V:(i+1)*V]
		delta := maxAbsDiff32(rowD, row) // in tempered logits
		raw := delta * float64(T)
		d := math.Abs(float64(out.Entropy[i]) - float64(outC.Entropy[i]))
		st.EntropyDiff = max(st.EntropyDiff, d)
		explained := true
		switch {
		case rerouted[i]:
			r.Rerouted++
			st.Rerouted++
		case disturbed:
			r.Disturbed++
		default:
			r.MaxEntropyDiff = max(r.MaxEntropyDiff, d)
			r.MaxLogitDiff = max(r.MaxLogitDiff, raw)
			if !(raw <= s.tol.Logit) {
				r.UnexplainedRows++
				explained = false
			}
		}
		if a, c := out.Argmax[i], outC.Argmax[i]; a != c {
			r.Argmax++
			if !explained || float64(row[c])-float64(row[a]) > 2*delta {
				r.UnexplainedArgmax++
			}
		}
		if a, b := out.Draw[i], outC.Draw[i]; a != b {
			r.Draw++
			if !explained || lockstepMassGap(row, us[i], min(a, b), max(a, b)) > math.Tanh(delta/2)+sumSlop {
				r.UnexplainedDraw++
			}
		}
	}
	bound := float32(s.gc.EntropyBound)
	mask, maskC := generate.AcceptMask(out.Entropy[:C], bound), generate.AcceptMask(outC.Entropy[:C], bound)
	if !slices.Equal(mask, maskC) {
		margin := lockstepMaskMargin(outC.Entropy[:C], bound)
		for i := range mask {
			if mask[i] != maskC[i] {
				r.Mask++
				if !disturbed && margin > 2*st.EntropyDiff {
					r.UnexplainedMask++
				}
			}
		}
	}
	st.Flips = r.Argmax + r.Draw + r.Mask - flips
	r.PerStep = append(r.PerStep, st)
}

// lockstepGaps returns n router margins, all +Inf.
func lockstepGaps(n int) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = math.Inf(1)
	}
	return g
}

// lockstepMassGap is how far the target u lies from the nearest cumulative
// probability boundary between indices lo and hi (inclusive) of the row's
// softmax (float64): a draw can flip between lo and hi only by that much
// probability mass.
func lockstepMassGap(row []float32, u float64, lo, hi int) float64 {
	m := float64(slices.Max(row))
	var sum float64
	var bounds []float64 // the cumulative weights after lo…hi−1
	for i, v := range row {
		sum += math.Exp(float64(v) - m)
		if i >= lo && i < hi {
			bounds = append(bounds, sum)
		}
	}
	gap := math.Inf(1)
	for _, c := range bounds {
		gap = min(gap, math.Abs(c/sum-u))
	}
	return gap
}

// lockstepMaskMargin is the smallest entropy change that can alter
// AcceptMask(ent, bound): the distance of each prefix sum from the bound,
// and the gap between the last accepted and the first rejected entropy in
// sorted order (reordering within either side changes nothing).
func lockstepMaskMargin(ent []float32, bound float32) float64 {
	s := slices.Clone(ent)
	slices.Sort(s)
	margin := math.Inf(1)
	var cum float64
	for i, v := range s {
		margin = min(margin, math.Abs(float64(float32(cum)-bound)))
		if i > 0 && float32(cum) > bound && float32(cum-float64(s[i-1])) <= bound {
			margin = min(margin, float64(v)-float64(s[i-1])) // s[i-1] accepted, s[i] not
		}
		cum += float64(v)
	}
	return margin
}

// LockstepBF16 derives the lockstep tolerances of bf16 precision from
// transformers in bfloat16 on the checkpoint of a reference (made by
// testdata/tools/hf_bf16.py): logits within the largest bound of the
// logits tensors of r, the pack's parity report in bf16 precision
// (F64Multiple times transformers' own bf16 distance to float64), and
// routing flips at CPU margins within F64Multiple times the largest float64
// margin at which transformers' bf16 routed a token otherwise than its
// float64 in the first rerouting layer (reference.json "bf16"). A report
// without a bf16 verdict, or a reference without those results, has no
// tolerances: ErrNoVerdict.
func LockstepBF16(r *ParityReport, refPath string) (LockstepTol, error) {
	if !r.Judged || r.Anchor != "bf16" {
		return LockstepTol{}, fmt.Errorf("%w: bf16 lockstep tolerances need a bf16 parity verdict against transformers' bfloat16 results (%s)", ErrNoVerdict, r.NoVerdict)
	}
	var tol LockstepTol
	for _, c := range r.Cases {
		if strings.HasPrefix(c.Name, "logits") && !math.IsInf(c.Tolerance, 0) {
			tol.Logit = max(tol.Logit, c.Tolerance)
		}
	}
	metaRaw, _, err := readReferenceFiles(refPath)
	if err != nil {
		return LockstepTol{}, err
	}
	var meta struct {
		BF16 struct {
			Routing struct {
				MaxCauseMargin *float64 `json:"max_cause_margin"`
			} `json:"routing_vs_f64"`
		} `json:"bf16"`
	}
	if err := json.Unmarshal(metaRaw, &meta); err != nil {
		return LockstepTol{}, fmt.Errorf("%w: reference.json: %v", ErrReference, err)
	}
	if meta.BF16.Routing.MaxCauseMargin == nil || tol.Logit == 0 {
		return LockstepTol{}, fmt.Errorf("%w: the reference records no bf16 routing against float64 (testdata/tools/hf_bf16.py)", ErrNoVerdict)
	}
	tol.Router = F64Multiple * *meta.BF16.Routing.MaxCauseMargin
	return tol, nil
}
