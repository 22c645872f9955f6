package check

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

// VerifyConvergence compares, block by block, the denoising steps the two
// models' seeded generations took to converge (docs/cli.md, "dgq verify").
// A (run, block) pair is compared when both models committed that block of
// that run; a block's steps are the steps until the model's own stop rule
// ended it, a block that reached the step limit without a stop rule
// counting at the limit (SourceAtLimit, PackAtLimit).
type VerifyConvergence struct {
	SourceStepsMean float64 `json:"source_steps_mean"`
	PackStepsMean   float64 `json:"pack_steps_mean"`
	// StepCost is PackStepsMean / SourceStepsMean; StepCostCI95 its 95 %
	// paired bootstrap interval (bootstrapRatio).
	StepCost     float64    `json:"step_cost"`
	StepCostCI95 [2]float64 `json:"step_cost_ci95"`
	Blocks       int        `json:"blocks"` // (run, block) pairs compared
	// Resamples is the bootstrap's resample count.
	Resamples int `json:"resamples"`
	// SourceSteps and PackSteps are the distributions of the steps per
	// block over the pairs.
	SourceSteps VerifyQuantiles `json:"source_steps"`
	PackSteps   VerifyQuantiles `json:"pack_steps"`
	// SourceAtLimit and PackAtLimit count the pairs' blocks that reached the
	// step limit (StepLimit) without the stop rule firing.
	SourceAtLimit int `json:"source_at_limit"`
	PackAtLimit   int `json:"pack_at_limit"`
	StepLimit     int `json:"step_limit"`
	// SettleMean is each model's mean, over the pairs, of the block's
	// settle step: the step from which the block's whole argmax canvas
	// stayed what it was at its last step.
	SettleMean VerifyPair `json:"settle_mean"`
}

// VerifyQuantiles is a distribution's minimum, nearest-rank median and 90th
// percentile, and maximum.
type VerifyQuantiles struct {
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	Max float64 `json:"max"`
}

// verifyResamples is the paired bootstrap's resample count.
const verifyResamples = 2000

// blockTrace records each block's steps, whether its stop rule fired and
// its settle step (generate.Options.Trace); a rerolled block's later steps
// replace its earlier ones.
type blockTrace struct {
	settleSteps
	steps   []int
	stopped []bool
}

func (b *blockTrace) step(st generate.StepTrace) {
	b.settleSteps.step(st)
	for len(b.steps) <= st.Block {
		b.steps, b.stopped = append(b.steps, 0), append(b.stopped, false)
	}
	b.steps[st.Block], b.stopped[st.Block] = st.Step, st.Stopped
}

// settle is block k's settle step: the latest first step of its positions'
// final argmax runs (0 when untraced).
func (b *blockTrace) settle(k int) int {
	if k >= len(b.from) {
		return 0
	}
	return slices.Max(append([]int{0}, b.from[k]...))
}

// convergeAcc gathers the (run, block) pairs of verifyGenerate.
type convergeAcc struct {
	src, pack             []float64 // steps per pair
	settleSrc, settlePack float64
	atLimit               [2]int
}

// add pairs the first blocks committed by both models of one run.
func (c *convergeAcc) add(s, p *blockTrace, blocksS, blocksP int) {
	for k := range min(blocksS, blocksP, len(s.steps), len(p.steps)) {
		c.src, c.pack = append(c.src, float64(s.steps[k])), append(c.pack, float64(p.steps[k]))
		c.settleSrc += float64(s.settle(k))
		c.settlePack += float64(p.settle(k))
		if !s.stopped[k] {
			c.atLimit[0]++
		}
		if !p.stopped[k] {
			c.atLimit[1]++
		}
	}
}

// report makes the VerifyConvergence, nil when no pair was compared.
func (c *convergeAcc) report(seed uint64, limit int) *VerifyConvergence {
	n := len(c.src)
	if n == 0 {
		return nil
	}
	r := &VerifyConvergence{SourceStepsMean: mean(c.src), PackStepsMean: mean(c.pack), Blocks: n, Resamples: verifyResamples,
		SourceSteps: quantiles(c.src), PackSteps: quantiles(c.pack),
		SourceAtLimit: c.atLimit[0], PackAtLimit: c.atLimit[1], StepLimit: limit,
		SettleMean: VerifyPair{Source: c.settleSrc / float64(n), Pack: c.settlePack / float64(n)}}
	r.StepCost = sumOf(c.pack) / sumOf(c.src)
	r.StepCostCI95 = bootstrapRatio(c.src, c.pack, verifyResamples, seed)
	return r
}

func quantiles(v []float64) VerifyQuantiles {
	s := slices.Sorted(slices.Values(v))
	return VerifyQuantiles{Min: s[0], P50: percentile(s, 0.5), P90: percentile(s, 0.9), Max: s[len(s)-1]}
}

func sumOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// bootstrapRatio is the 95 % paired bootstrap interval of Σ num / Σ den
// over the pairs (den[i], num[i]): resamples draws of len(den) pairs with
// replacement (a PCG stream seeded from seed), each draw's ratio of sums
// (= ratio of means), and the nearest-rank 2.5th and 97.5th percentiles of
// those ratios. A draw whose den sums to 0 counts as +Inf. Deterministic.
func bootstrapRatio(den, num []float64, resamples int, seed uint64) [2]float64 {
	n := len(den)
	if n == 0 || resamples <= 0 {
		return [2]float64{}
	}
	rng := rand.New(rand.NewPCG(seed, 0x626f6f7473747261)) // "bootstra"
	ratios := make([]float64, resamples)
	for b := range ratios {
		var sd, sn float64
		for range n {
			i := rng.IntN(n)
			sd, sn = sd+den[i], sn+num[i]
		}
		ratios[b] = sn / sd
	}
	slices.Sort(ratios)
	return [2]float64{percentile(ratios, 0.025), percentile(ratios, 0.975)}
}

// verifyRounding measures the rounding KLD: the source run in bf16
// arithmetic against itself in f32 on verify's windows, KL(f32‖bf16) mean
// over the same positions as kld. The source is loaded a second time at the
// other precision from ss's pack folder. A backend without bf16 arithmetic
// (cpu: f32 only; its RoundBF16 op rounds stored values, but no forward
// pass runs in bf16 on it) gives nil and a note.
func verifyRounding(ctx context.Context, ss *session.Session, wins []verifyWindow, o VerifyOptions, T float32, rep *VerifyReport) (*float64, error) {
	lo := o.Load
	lo.Workload, lo.SkipDigests, lo.Note = nil, true, nil
	lo.Precision = backend.BF16
	if rep.Precision == backend.BF16 {
		lo.Precision = backend.F32
	}
	noBF16 := fmt.Sprintf("rounding_kld_mean not measured: the %s backend has no bf16 arithmetic (the cpu backend computes in f32 only); --backend cuda --rounding measures it", rep.Backend)
	if rep.Backend == "cpu" {
		rep.Notes = append(rep.Notes, noBF16)
		return nil, nil
	}
	other, err := session.Load(ctx, ss.Pack.Dir, lo)
	if errors.Is(err, backend.ErrUnknown) {
		rep.Notes = append(rep.Notes, noBF16)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify: the source at %s: %w", lo.Precision, err)
	}
	defer other.Close()
	ref, test := ss, other // KL(f32‖bf16)
	if rep.Precision == backend.BF16 {
		ref, test = other, ss
	}
	v := newVerifyRun(test, ref, len(o.NoiseRates))
	v.routes, v.T = false, T
	for w, win := range wins {
		if err := v.window(ctx, w, win, o); err != nil {
			return nil, fmt.Errorf("verify: rounding: %w", err)
		}
	}
	var r VerifyReport
	r.NoiseRates = o.NoiseRates
	v.acc.report(&r, false)
	m := r.KLD.Mean
	return &m, nil
}
