package check

import (
	"context"
	"math"
	"slices"

	"github.com/dgq-dev/dgq/runtime/cpu"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
)

// LockstepReport compares, step by step, a generation on an Engine with a
// CPU engine of the same model fed the very same inputs: each step the CPU denoises
// the canvas the engine denoised, self-conditioned on the same logits (the
// engine's tempered logits of the previous step), and tempers and samples
// with the same temperature and uniforms, so each step's differences are
// that step's alone (self-conditioning feeds a step's logits into the next,
// and on the random-weight fixtures it amplifies a difference ~10–40× per
// step: two whole generations part within a few steps however close the
// arithmetic). The generation follows the engine. Every
// per-position disagreement is classified: explained when the CPU's own
// margin for that decision is within the documented noise of f32 against
// the CPU's float64 sums (a near tie), unexplained otherwise.
type LockstepReport struct {
	Generation *generate.Generation
	Steps      int
	Positions  int // positions compared (steps × canvas)
	// MaxEntropyDiff is the largest |entropy_engine − entropy_cpu| (nats).
	MaxEntropyDiff float64
	// Argmax, Draw and Mask count positions whose argmax, categorical draw or
	// accept decision differ; the Unexplained ones had a CPU margin larger
	// than the tolerance (LockstepLogitTol, LockstepMassTol, the entropy
	// difference).
	Argmax, Draw, Mask                                  int
	UnexplainedArgmax, UnexplainedDraw, UnexplainedMask int
	// RouterTied counts the positions whose routing on the CPU chose an
	// expert by a probability margin under LockstepRouterTol in some layer
	// of the step, or every position of a step after a prefill that did so
	// for some token (its KV rows may differ): the engine's f32 router may
	// take the other expert there, which changes the position's output
	// wholesale. Disagreements at such positions are counted but never
	// unexplained, and stay out of MaxEntropyDiff.
	RouterTied int
	// PerStep holds each step's largest tempered-logit and entropy
	// differences, its flips (argmax + draw + mask) and the CPU router's
	// smallest selection margin.
	PerStep []LockstepStep
}

// LockstepStep is one step of a LockstepReport.
type LockstepStep struct {
	LogitDiff, EntropyDiff float64
	Flips                  int
	RouterGap              float64
}

// Tolerances of the lockstep comparison: a differing argmax is explained
// when the CPU's tempered logits of the two indices are within
// LockstepLogitTol; a differing draw when the CPU's cumulative probability
// mass at the boundary between the two indices is within LockstepMassTol of
// the target u.
const (
	LockstepLogitTol  = 2e-2
	LockstepMassTol   = 1e-3
	LockstepRouterTol = 1e-4
)

// GenerateLockstep runs generate.Generate on the engine with a CPU engine
// of the same model in lockstep (LockstepReport).
func GenerateLockstep(ctx context.Context, e *model.Engine, prompt []int, gc *generate.Config, o generate.Options) (*LockstepReport, error) {
	cb := cpu.New(0)
	ce, err := model.NewEngine(e.Model(), cb)
	if err != nil {
		return nil, err
	}
	defer ce.Close()
	s := &lockstepStepper{dev: generate.NewStepper(e), cpu: generate.NewStepper(ce), devE: e, cpuE: ce, cb: cb,
		V: e.Model().Vocab(), gc: gc}
	if s.gc == nil {
		s.gc = generate.DefaultConfig()
	}
	g, err := generate.Run(ctx, e.Model().Config(), s, prompt, gc, o)
	s.rep.Generation = g
	return &s.rep, err
}

type lockstepStepper struct {
	dev, cpu    generate.Stepper
	devE, cpuE  *model.Engine
	cb          *cpu.Backend // cpuE's backend: it reports the router margins
	V           int
	gc          *generate.Config
	rep         LockstepReport
	prefillTied bool // the last prefill routed a token on a near tie
}

func (s *lockstepStepper) Start() error {
	if err := s.dev.Start(); err != nil {
		return err
	}
	return s.cpu.Start()
}

func (s *lockstepStepper) Close() { s.dev.Close(); s.cpu.Close() }

func (s *lockstepStepper) Prefill(ids []int) error {
	if err := s.dev.Prefill(ids); err != nil {
		return err
	}
	// A near tie in the prefill's routing may give the engine other KV rows
	// for a token: every step until the next prefill is then tied.
	gaps := lockstepGaps(len(ids))
	s.cb.RecordRouterMargins(gaps)
	defer s.cb.RecordRouterMargins(nil)
	s.prefillTied = false
	if err := s.cpu.Prefill(ids); err != nil {
		return err
	}
	s.prefillTied = slices.Min(gaps) <= LockstepRouterTol
	return nil
}

func (s *lockstepStepper) Step(canvas []int, sc generate.SC, T float32, us []float64, out model.StepStats) error {
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
	if err := s.dev.Step(canvas, sc, T, us, out); err != nil {
		return err
	}
	outC := model.StepStats{Entropy: make([]float32, C), Argmax: make([]int, C), Draw: make([]int, C)}
	gaps := lockstepGaps(C)
	s.cb.RecordRouterMargins(gaps)
	err := s.cpu.Step(canvas, sc, T, us, outC)
	s.cb.RecordRouterMargins(nil)
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
	s.compare(z, zd, gaps, us, out, outC)
	return nil
}

// compare classifies one step's disagreements between the engine (out, its
// tempered logits zd) and the CPU (outC, z), gaps the CPU's router margins.
func (s *lockstepStepper) compare(z, zd []float32, gaps, us []float64, out, outC model.StepStats) {
	C, V := len(gaps), s.V
	r := &s.rep
	r.Steps++
	r.Positions += C
	st := LockstepStep{RouterGap: slices.Min(gaps), LogitDiff: maxAbsDiff32(zd, z)}
	flips := r.Argmax + r.Draw + r.Mask
	tiedAny := false
	for i := range C {
		tied := s.prefillTied || gaps[i] <= LockstepRouterTol
		if tied {
			r.RouterTied++
			tiedAny = true
		}
		d := math.Abs(float64(out.Entropy[i]) - float64(outC.Entropy[i]))
		st.EntropyDiff = max(st.EntropyDiff, d)
		if !tied {
			r.MaxEntropyDiff = max(r.MaxEntropyDiff, d)
		}
		row := z[i*V : (i+1)*V]
		if a, c := out.Argmax[i], outC.Argmax[i]; a != c {
			r.Argmax++
			if !tied && float64(row[c])-float64(row[a]) > LockstepLogitTol {
				r.UnexplainedArgmax++
			}
		}
		if a, b := out.Draw[i], outC.Draw[i]; a != b {
			r.Draw++
			if !tied && lockstepMassGap(row, us[i], min(a, b), max(a, b)) > LockstepMassTol {
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
				if !tiedAny && margin > 2*st.EntropyDiff {
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
