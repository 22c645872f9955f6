package generate

import "slices"

// The entropy-bound sampler's host pieces (MODEL_SPEC §4.3): the
// temperature schedule, the accept mask and the mean entropy. The per-row
// arithmetic (temper, entropy, argmax, draws) is the backend's (package cpu
// holds its reference).

// Temperature is the linear schedule's temperature when cur denoising steps
// remain (cur = N for the first step of a block, 1 for the last; N =
// gc.MaxDenoisingSteps), evaluated in float32 as transformers does
// (MODEL_SPEC §4.3 step 2): q = float32(cur)/float32(N), then
// T = float32(q · float32(t_max − t_min)) + float32(t_min). With the default
// config T(48) = 0.800000011920929 and T(1) = 0.40833333134651184.
func Temperature(gc *Config, cur int) float32 {
	q := float32(cur) / float32(gc.MaxDenoisingSteps)
	span := float32(gc.TMax - gc.TMin)
	return float32(q*span) + float32(gc.TMin)
}

// AcceptMask is the entropy-bound sampler's accept mask (MODEL_SPEC §4.3
// step 6): positions sorted by ascending entropy (ties by ascending
// position); the j-th sorted position is accepted iff the sum of the
// entropies before it is ≤ bound. As transformers does, the sum is the
// inclusive cumulative sum (accumulated in float64, each prefix rounded to
// float32, as PyTorch's CPU cumsum) minus the element, in float32, compared
// with bound as float32. The lowest-entropy position is always accepted.
func AcceptMask(entropy []float32, bound float32) []bool {
	order := make([]int, len(entropy))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case entropy[a] < entropy[b]:
			return -1
		case entropy[a] > entropy[b]:
			return 1
		}
		return 0
	})
	mask := make([]bool, len(entropy))
	var cum float64
	for _, i := range order {
		cum += float64(entropy[i])
		mask[i] = float32(cum)-entropy[i] <= bound
	}
	return mask
}

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
