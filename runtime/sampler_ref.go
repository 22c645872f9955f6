package runtime

import (
	"math"
	"slices"
)

// Entropy is the entropy in nats of softmax(logits), computed as
// torch.distributions.Categorical(logits=…).entropy() does in float32
// (MODEL_SPEC §4.3 step 5): normalized logits ℓ = z − logsumexp(z),
// p = softmax(ℓ), H = −Σ ℓ·p (ℓ clamped at the float32 minimum, which only
// matters for −∞ entries).
func Entropy(logits []float32) float32 {
	if len(logits) == 0 {
		return 0
	}
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range logits {
		sum += float64(float32(math.Exp(float64(v - mx))))
	}
	lse := mx + float32(math.Log(float64(float32(sum))))
	nl := make([]float32, len(logits))
	for i, v := range logits {
		nl[i] = max(v-lse, -math.MaxFloat32)
	}
	p := make([]float32, len(logits))
	softmax(nl, p)
	var h float64
	for i, l := range nl {
		h += float64(l * p[i])
	}
	return -float32(h)
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

// Argmax is the index of the first maximal element (torch.argmax's choice).
func Argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}
