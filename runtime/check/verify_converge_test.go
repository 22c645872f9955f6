package check

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	_ "github.com/dgq-dev/dgq/cuda" // registers --backend cuda, for TestVerifyRoundingCUDA
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// convergeOpts asks for 3 generations of tokens new tokens each (the tiny
// fixture's canvas is 16: up to tokens/16 blocks).
func convergeOpts(src string, tokens int) VerifyOptions {
	return VerifyOptions{Source: src, Generations: 3, GenTokens: tokens}
}

// A bf16 pack against its own source takes the very same steps in every
// block: step cost exactly 1, interval [1, 1].
func TestVerifyConvergenceBF16(t *testing.T) {
	r := verifyOK(t, fixture.PackDir(t, "tiny", "bf16"), convergeOpts(fixture.PackDir(t, "tiny", "bf16"), 32))
	c := r.Convergence
	if c == nil {
		t.Fatal("no convergence")
	}
	if c.StepCost != 1 || c.StepCostCI95 != [2]float64{1, 1} || c.SourceStepsMean != c.PackStepsMean ||
		c.SourceSteps != c.PackSteps || c.SourceAtLimit != c.PackAtLimit || c.SettleMean.Source != c.SettleMean.Pack {
		t.Errorf("convergence %+v", c)
	}
	checkBlocks(t, r, 2)
}

// checkBlocks: a run commits between 1 block and perRun (an eos in a block
// ends the run after it); with perRun 1, blocks = runs exactly.
func checkBlocks(t *testing.T, r *VerifyReport, perRun int) {
	t.Helper()
	c, runs := r.Convergence, r.Generation.Runs
	if c.Blocks < runs || c.Blocks > runs*perRun || c.StepLimit != 8 || c.Resamples != verifyResamples {
		t.Errorf("blocks %d (want %d…%d), limit %d, resamples %d", c.Blocks, runs, runs*perRun, c.StepLimit, c.Resamples)
	}
	if c.SourceAtLimit > c.Blocks || c.PackAtLimit > c.Blocks || c.SourceSteps.Max > float64(c.StepLimit) || c.SourceSteps.Min < 1 ||
		c.SourceSteps.Min > c.SourceSteps.P50 || c.SourceSteps.P50 > c.SourceSteps.P90 || c.SourceSteps.P90 > c.SourceSteps.Max {
		t.Errorf("convergence %+v", c)
	}
}

// A q4 pack: a finite step cost inside its interval, the same interval
// from the same seed.
func TestVerifyConvergenceQ4(t *testing.T) {
	q4, bf16 := fixture.PackDir(t, "tiny", "q4"), fixture.PackDir(t, "tiny", "bf16")
	r := verifyOK(t, q4, convergeOpts(bf16, 0)) // one block a run
	c := r.Convergence
	if c == nil {
		t.Fatal("no convergence")
	}
	t.Logf("convergence %+v", c)
	lo, hi := c.StepCostCI95[0], c.StepCostCI95[1]
	if math.IsNaN(c.StepCost) || math.IsInf(c.StepCost, 0) || !(lo <= c.StepCost && c.StepCost <= hi) {
		t.Errorf("step cost %g, interval [%g, %g]", c.StepCost, lo, hi)
	}
	if want := c.PackStepsMean / c.SourceStepsMean; math.Abs(c.StepCost-want) > 1e-12 {
		t.Errorf("step cost %g, means give %g", c.StepCost, want)
	}
	checkBlocks(t, r, 1)
	r2 := verifyOK(t, q4, convergeOpts(bf16, 0))
	if *r2.Convergence != *c {
		t.Errorf("same seed, another result: %+v vs %+v", r2.Convergence, c)
	}
	// The contract's keys, null where not measured (cpu: no bf16 arithmetic).
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"convergence", "rounding_kld_mean", "kld_vs_rounding"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	cm := m["convergence"].(map[string]any)
	for _, k := range []string{"source_steps_mean", "pack_steps_mean", "step_cost", "step_cost_ci95", "blocks", "source_steps", "pack_steps", "source_at_limit", "pack_at_limit"} {
		if _, ok := cm[k]; !ok {
			t.Errorf("convergence key %q missing", k)
		}
	}
	if m["rounding_kld_mean"] != nil || m["kld_vs_rounding"] != nil {
		t.Errorf("rounding %v, %v without --rounding", m["rounding_kld_mean"], m["kld_vs_rounding"])
	}
}

// On the cpu backend --rounding gives null and a note naming the backend
// that measures it.
func TestVerifyRoundingCPU(t *testing.T) {
	bf16 := fixture.PackDir(t, "tiny", "bf16")
	r := verifyOK(t, fixture.PackDir(t, "tiny", "q4"), VerifyOptions{Source: bf16, Rounding: true, Generations: -1})
	if r.RoundingKLDMean != nil || r.KLDVsRounding != nil || r.Convergence != nil {
		t.Errorf("rounding %v, ratio %v, convergence %v", r.RoundingKLDMean, r.KLDVsRounding, r.Convergence)
	}
	found := false
	for _, n := range r.Notes {
		found = found || strings.Contains(n, "no bf16 arithmetic") && strings.Contains(n, "cuda")
	}
	if !found {
		t.Errorf("notes %q", r.Notes)
	}
}

// On cuda (skipped without a GPU) --rounding measures the source's bf16
// rounding KLD, at either precision of the run: finite, positive, and the
// pack's KLD reads as a multiple of it.
func TestVerifyRoundingCUDA(t *testing.T) {
	q4, bf16 := fixture.PackDir(t, "tiny", "q4"), fixture.PackDir(t, "tiny", "bf16")
	for _, prec := range []string{backend.F32, backend.BF16} {
		o := quickVerify(VerifyOptions{Source: bf16, Rounding: true, Generations: -1})
		o.Load.Backend, o.Load.Precision = "cuda", prec
		r, err := Verify(context.Background(), q4, o)
		if errors.Is(err, backend.ErrUnavailable) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.RoundingKLDMean == nil || r.KLDVsRounding == nil {
			t.Fatalf("%s: rounding %v ratio %v, notes %q", prec, r.RoundingKLDMean, r.KLDVsRounding, r.Notes)
		}
		rk := *r.RoundingKLDMean
		t.Logf("%s: kld %.4g, rounding kld %.4g, ratio %.4g", prec, r.KLD.Mean, rk, *r.KLDVsRounding)
		if !(rk > 0) || math.IsInf(rk, 0) || *r.KLDVsRounding != r.KLD.Mean/rk {
			t.Errorf("%s: rounding kld %g, ratio %g", prec, rk, *r.KLDVsRounding)
		}
	}
}

// The bootstrap on constructed samples: equal pairs give [1, 1]; a constant
// ratio gives that ratio; a mixed sample's interval holds its ratio of
// means, is deterministic per seed and moves with the seed.
func TestBootstrapRatio(t *testing.T) {
	same := []float64{3, 5, 8, 8, 2}
	if ci := bootstrapRatio(same, same, 2000, 1); ci != [2]float64{1, 1} {
		t.Errorf("equal pairs: %v", ci)
	}
	double := []float64{6, 10, 16, 16, 4}
	if ci := bootstrapRatio(same, double, 2000, 1); ci != [2]float64{2, 2} {
		t.Errorf("constant ratio 2: %v", ci)
	}
	src := []float64{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}
	pack := []float64{4, 4, 4, 4, 4, 8, 8, 8, 8, 8} // ratio of means 1.5
	a := bootstrapRatio(src, pack, 2000, 7)
	if !(a[0] < 1.5 && 1.5 < a[1]) || a[0] < 1 || a[1] > 2 {
		t.Errorf("interval %v does not hold 1.5 within [1, 2]", a)
	}
	if b := bootstrapRatio(src, pack, 2000, 7); b != a {
		t.Errorf("same seed: %v vs %v", b, a)
	}
	moved := false
	for seed := uint64(8); seed < 16 && !moved; seed++ {
		moved = bootstrapRatio(src, pack, 50, seed) != bootstrapRatio(src, pack, 50, 7)
	}
	if !moved {
		t.Error("the interval does not depend on the seed")
	}
	// Half the pairs doubled: each draw's ratio is 1 + k/10, k ~ Bin(10, ½),
	// so the interval is about [1.2, 1.8].
	if math.Abs(a[0]-1.2) > 0.1001 || math.Abs(a[1]-1.8) > 0.1001 {
		t.Errorf("interval %v, want about [1.2, 1.8]", a)
	}
	if ci := bootstrapRatio(nil, nil, 2000, 1); ci != [2]float64{} {
		t.Errorf("empty: %v", ci)
	}
}

// blockTrace keeps each block's last step, whether the stop rule fired and
// the settle step; convergeAcc pairs the blocks both committed and counts
// those at the limit.
func TestBlockTrace(t *testing.T) {
	var s, p blockTrace
	for k := 1; k <= 3; k++ {
		s.step(generate.StepTrace{Block: 0, Step: k, Argmax: []int{1, 2}, Stopped: k == 3})
	}
	for k := 1; k <= 4; k++ { // block 0 at the limit 4, its argmax settled at step 2
		p.step(generate.StepTrace{Block: 0, Step: k, Argmax: []int{1, min(k, 2)}})
	}
	s.step(generate.StepTrace{Block: 1, Step: 1, Argmax: []int{5, 5}, Stopped: true})
	var c convergeAcc
	c.add(&s, &p, 2, 1)
	r := c.report(0, 4)
	if r.Blocks != 1 || r.SourceStepsMean != 3 || r.PackStepsMean != 4 || r.StepCost != 4.0/3 ||
		r.SourceAtLimit != 0 || r.PackAtLimit != 1 || r.SettleMean != (VerifyPair{Source: 1, Pack: 2}) ||
		r.StepCostCI95 != [2]float64{4.0 / 3, 4.0 / 3} {
		t.Errorf("%+v", r)
	}
	if (&convergeAcc{}).report(0, 4) != nil {
		t.Error("no pairs gave a report")
	}
}
