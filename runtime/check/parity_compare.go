package check

import (
	"math"
	"strings"

	"github.com/dgq-dev/dgq/runtime/cpu"
)

// Float64-anchored bounds (a reference with f64/<name> results): a tensor
// passes when its max abs distance to the float64 result is within
// F64Multiple times transformers' own float32 distance to it (RefErr): "as
// close to the truth as transformers in float32 is, within a factor of
// two". F64Floor keeps the bound above float32 resolution where the
// reference happens to land almost exactly on the float64 result: 2⁻²⁰
// (8 ulps of float32) of the tensor's largest magnitude, at least 1.
const (
	F64Multiple = 2
	F64Floor    = 0x1p-20
)

// isLogits reports whether a reference tensor holds logits rows.
func isLogits(name string) bool { return strings.Contains(name, "logits") }

// compareFloat compares one float tensor with the reference: with the
// reference's float64 result when it has one (bounds from its float32
// error), else with its float32 values (bounds b).
func compareFloat(name string, got []float32, ref refTensor, b Bounds) ParityCase {
	c := ParityCase{Name: name, ArgmaxAgree: 1, RefErr: -1}
	truth := ref.f64
	if truth == nil {
		truth = make([]float64, len(ref.f))
		for i, v := range ref.f {
			truth[i] = float64(v)
		}
	}
	var sum, dot, ng, nr float64
	for i, g := range got {
		w := truth[i]
		d := math.Abs(float64(g) - w)
		if !(d <= c.MaxAbsErr) { // NaN propagates as a failure
			c.MaxAbsErr = d
		}
		sum += d
		dot += float64(g) * w
		ng += float64(g) * float64(g)
		nr += w * w
	}
	c.MeanAbsErr = sum / float64(max(len(got), 1))
	c.Cosine = 1
	if ng > 0 || nr > 0 {
		c.Cosine = dot / math.Sqrt(ng*nr)
	}
	tieGap := ArgmaxTieGap
	if ref.f64 != nil {
		own := ref.f // transformers' float32 run, or its bfloat16 one (b.BF16)
		if b.BF16 && ref.bf16 != nil {
			own = ref.bf16
		}
		var scale float64
		c.RefErr = 0
		for i, w := range ref.f64 {
			c.RefErr = max(c.RefErr, math.Abs(float64(own[i])-w))
			scale = max(scale, math.Abs(w))
		}
		c.Tolerance = max(F64Multiple*c.RefErr, F64Floor*max(scale, 1))
		if b.BF16 {
			tieGap = 2 * c.Tolerance
		}
	} else {
		c.Tolerance = b.Hidden
		if isLogits(name) || strings.Contains(name, "entropy") {
			c.Tolerance = b.Logits
		}
	}
	c.Pass = c.MaxAbsErr <= c.Tolerance
	if isLogits(name) && len(ref.shape) >= 1 {
		V := ref.shape[len(ref.shape)-1]
		rows, agree := len(got)/V, 0
		for t := range rows {
			g, w := got[t*V:(t+1)*V], truth[t*V:(t+1)*V]
			a, e := cpu.Argmax(g), cpu.Argmax(w)
			if a == e || w[e]-w[a] < tieGap {
				agree++
			}
		}
		if rows > 0 {
			c.ArgmaxAgree = float64(agree) / float64(rows)
		}
		c.Pass = c.Pass && 1-c.ArgmaxAgree <= b.Mismatch
	}
	return c
}

func compareInt(name string, got, ref []int64, b Bounds) ParityCase {
	c := ParityCase{Name: name, Cosine: 1, ArgmaxAgree: 1, RefErr: -1}
	equal := 0
	var sum float64
	for i, g := range got {
		d := math.Abs(float64(g - ref[i]))
		c.MaxAbsErr = max(c.MaxAbsErr, d)
		sum += d
		if d == 0 {
			equal++
		}
	}
	if len(got) > 0 {
		c.MeanAbsErr = sum / float64(len(got))
		c.ArgmaxAgree = float64(equal) / float64(len(got))
	}
	c.Pass = b.BF16 || 1-c.ArgmaxAgree <= b.Mismatch
	if b.BF16 {
		c.Tolerance = math.Inf(1)
	}
	return c
}

// entropyBound widens a float64-anchored step1_entropy bound to what the
// sc2_logits bound allows: to first order a row's entropy moves by
// |ΔH| ≤ Σ_i p_i·|log p_i + H|·max|Δz| under a logit error Δz, so with the
// sensitivity S = max over rows of Σ_i p_i·|log p_i + H| (from the float64
// logits) the entropy may err by S times the logits' tolerance. Entropies
// are a function of the logits; bounding them by transformers' own entropy
// error alone would hold them to a tighter standard than their input.
func (r *parityRun) entropyBound(rep *ParityReport) {
	sc2 := r.refs["sc2_logits"]
	var ent, logits *ParityCase
	for i := range rep.Cases {
		switch rep.Cases[i].Name {
		case "step1_entropy":
			ent = &rep.Cases[i]
		case "sc2_logits":
			logits = &rep.Cases[i]
		}
	}
	if ent == nil || logits == nil || ent.RefErr < 0 || sc2.f64 == nil || len(sc2.shape) == 0 {
		return
	}
	V := sc2.shape[len(sc2.shape)-1]
	var sens float64
	for t := 0; (t+1)*V <= len(sc2.f64); t++ {
		sens = max(sens, entropySensitivity(sc2.f64[t*V:(t+1)*V]))
	}
	ent.Tolerance = max(ent.Tolerance, sens*logits.Tolerance)
	ent.Pass = ent.MaxAbsErr <= ent.Tolerance
	rep.Pass = true
	for _, c := range rep.Cases {
		rep.Pass = rep.Pass && c.Pass
	}
}

// entropySensitivity is Σ_i p_i·|log p_i + H| for p = softmax(z), the
// largest first-order change of the entropy H per unit of max|Δz|.
func entropySensitivity(z []float64) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = max(m, v)
	}
	var sum float64
	for _, v := range z {
		sum += math.Exp(v - m)
	}
	lse := m + math.Log(sum)
	var h float64
	for _, v := range z {
		if l := v - lse; l > -700 {
			h -= math.Exp(l) * l
		}
	}
	var s float64
	for _, v := range z {
		if l := v - lse; l > -700 {
			s += math.Exp(l) * math.Abs(l+h)
		}
	}
	return s
}
