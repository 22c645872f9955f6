package runtime

import (
	"math"
	goruntime "runtime"
	"sync"
)

// The entropy-bound sampler's pure pieces (MODEL_SPEC §4.3), as functions of
// the logits, so other backends and tests can check them against
// transformers' values. The accept mask and the argmax are AcceptMask and
// Argmax (sampler_ref.go); RowEntropy is Entropy applied to tempered logits.

// Temperature is the linear schedule's temperature when cur denoising steps
// remain (cur = N for the first step of a block, 1 for the last; N =
// gc.MaxDenoisingSteps), evaluated in float32 as transformers does
// (MODEL_SPEC §4.3 step 2): q = float32(cur)/float32(N), then
// T = float32(q · float32(t_max − t_min)) + float32(t_min). With the default
// config T(48) = 0.800000011920929 and T(1) = 0.40833333134651184.
func Temperature(gc *GenerationConfig, cur int) float32 {
	q := float32(cur) / float32(gc.MaxDenoisingSteps)
	span := float32(gc.TMax - gc.TMin)
	return float32(q*span) + float32(gc.TMin)
}

// TemperRow writes logits/T to out (Z′ = Z / T, one float32 division per
// element, not a multiplication by 1/T). out may alias logits.
func TemperRow(logits []float32, T float32, out []float32) {
	out = out[:len(logits)]
	for i, z := range logits {
		out[i] = z / T
	}
}

// RowEntropy is the entropy in nats of softmax(tempered), in float32, as
// torch.distributions.Categorical(logits=tempered).entropy()
// (MODEL_SPEC §4.3 step 5). tempered are the logits already divided by the
// temperature.
func RowEntropy(tempered []float32) float32 { return Entropy(tempered) }

// sampMeanEntropy is the mean of the per-position entropies as float32: the
// sum accumulated in float64, rounded to float32, divided by float32(C).
func sampMeanEntropy(h []float32) float32 {
	if len(h) == 0 {
		return 0
	}
	var s float64
	for _, v := range h {
		s += float64(v)
	}
	return float32(s) / float32(len(h))
}

// sampRoundBF16 rounds x to the nearest bfloat16 (ties to even), returned as
// float32; NaN stays NaN.
func sampRoundBF16(x float32) float32 {
	b := math.Float32bits(x)
	if x != x {
		return x
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// sampStepStats tempers each row of logits ([C][V]) in place by T and
// computes its entropy and argmax (MODEL_SPEC §4.3 steps 2, 4, 5). Rows are
// split over workers goroutines; each row is computed by one goroutine, so
// results do not depend on the split.
func sampStepStats(logits []float32, C, V int, T float32, workers int, ent []float32, amax []int) {
	row := func(i int) {
		r := logits[i*V : (i+1)*V]
		TemperRow(r, T, r)
		ent[i] = RowEntropy(r)
		amax[i] = Argmax(r)
	}
	workers = min(max(workers, 1), C)
	if workers == 1 {
		for i := range C {
			row(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * C / workers; i < (w+1)*C/workers; i++ {
				row(i)
			}
		})
	}
	wg.Wait()
}

// sampWorkers is the number of goroutines the sampler uses for m: the
// model's own worker count when it has one, else GOMAXPROCS.
func sampWorkers(m any) int {
	if w, ok := m.(interface{ Workers() int }); ok && w.Workers() > 0 {
		return w.Workers()
	}
	return goruntime.GOMAXPROCS(0)
}
