package check

import (
	"context"
	"fmt"
	"github.com/dgq-dev/dgq/runtime/backend"
	"math"
	"slices"
	"strings"

	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// verifyAcc accumulates Verify's measurements: per (noise rate, SC) cell
// the positions' KLDs and counts, per hidden state the errors, per MoE
// layer the router agreement.
type verifyAcc struct {
	cells     []verifyCell // rate index·2 + SC
	hidden    []hiddenAcc  // decoder input, layers 1…L
	nonFinite int
	ls, lp    []float64 // log-softmax rows (scratch)
}

type verifyCell struct {
	kld              []float64
	top1, accS, accP int
}

type hiddenAcc struct {
	rel, cos      float64
	calls         int
	agree, routed int // router: rows whose top-k sets agree, rows compared
}

func newVerifyAcc(rates, layers int) verifyAcc {
	return verifyAcc{cells: make([]verifyCell, 2*rates), hidden: make([]hiddenAcc, layers+1)}
}

// measure compares one denoise call's logits ([C][V]) position by
// position: KL(source‖pack) of the softmaxes (float64), argmax agreement,
// and each model's argmax against the true tokens.
func (a *verifyAcc) measure(ctx context.Context, cell int, zs, zp []float32, truth []int, V int) error {
	if len(a.ls) != V {
		a.ls, a.lp = make([]float64, V), make([]float64, V)
	}
	c := &a.cells[cell]
	for t, want := range truth {
		if err := ctx.Err(); err != nil {
			return err // a position is ~10 ms at the real vocabulary; a canvas seconds
		}
		rs, rp := zs[t*V:(t+1)*V], zp[t*V:(t+1)*V]
		if !logSoftmax(rs, a.ls) || !logSoftmax(rp, a.lp) {
			a.nonFinite++
			continue
		}
		c.kld = append(c.kld, klDivergence(a.ls, a.lp))
		as, ap := cpu.Argmax(rs), cpu.Argmax(rp)
		c.top1 += boolIndex(as == ap)
		c.accS += boolIndex(as == want)
		c.accP += boolIndex(ap == want)
	}
	return nil
}

// logSoftmax writes log softmax(z) in float64 into dst; false when z holds
// a NaN or an infinity.
func logSoftmax(z []float32, dst []float64) bool {
	m := math.Inf(-1)
	for _, v := range z {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		m = max(m, f)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	for i, v := range z {
		dst[i] = float64(v) - lse
	}
	return true
}

// klDivergence is KL(p‖q) = Σ p·(log p − log q) of two log-probability
// rows, ≥ 0 (exactly 0 for equal rows).
func klDivergence(lp, lq []float64) float64 {
	var s float64
	for i, l := range lp {
		if p := math.Exp(l); p > 0 {
			s += p * (l - lq[i])
		}
	}
	return max(s, 0)
}

// layers compares one call's hidden states: the relative error
// ‖h_p − h_s‖/‖h_s‖ and the cosine of each flattened [C][H] state. A
// non-finite result is left out.
func (a *verifyAcc) layers(hs, hp [][]float32) {
	for i := range min(len(hs), len(hp), len(a.hidden)) {
		var d2, ns, np, dot float64
		for j, s := range hs[i] {
			s, p := float64(s), float64(hp[i][j])
			d2 += (p - s) * (p - s)
			ns += s * s
			np += p * p
			dot += s * p
		}
		rel, cos := math.Sqrt(d2/ns), dot/math.Sqrt(ns*np)
		if d2 == 0 {
			rel, cos = 0, 1
		}
		if math.IsNaN(rel+cos) || math.IsInf(rel+cos, 0) {
			continue
		}
		h := &a.hidden[i]
		h.rel += rel
		h.cos += cos
		h.calls++
	}
}

// routes compares one call's router choices: MoE call k is decoder layer
// k+1; a row agrees when both chose the same set of experts.
func (a *verifyAcc) routes(rs, rp backend.Routes) {
	if len(rs.Calls) != len(a.hidden)-1 || len(rp.Calls) != len(rs.Calls) {
		return // not one call per layer: nothing to pair
	}
	for k, cs := range rs.Calls {
		cp := rp.Calls[k]
		if cs.Rows != cp.Rows || cs.K != cp.K {
			continue
		}
		h := &a.hidden[k+1]
		for t := range cs.Rows {
			h.agree += boolIndex(sameSet(cs.Row(t), cp.Row(t)))
			h.routed++
		}
	}
}

// sameSet reports whether two lists of distinct ids hold the same ids.
func sameSet(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return len(a) == len(b)
}

// report writes the accumulated measurements into rep.
func (a *verifyAcc) report(rep *VerifyReport, routes bool) {
	var all []float64
	var top1, accS, accP int
	rep.PerNoise = make([]VerifyNoise, len(a.cells))
	for i := range a.cells {
		c := &a.cells[i]
		n := len(c.kld)
		all = append(all, c.kld...)
		top1, accS, accP = top1+c.top1, accS+c.accS, accP+c.accP
		slices.Sort(c.kld)
		rep.PerNoise[i] = VerifyNoise{Rate: rep.NoiseRates[i/2], SC: i%2 == 1, Positions: n, KLDMean: mean(c.kld),
			KLDP99: percentile(c.kld, 0.99), KLDMax: percentile(c.kld, 1), Top1: ratio(c.top1, n),
			AccSource: ratio(c.accS, n), AccPack: ratio(c.accP, n)}
	}
	slices.Sort(all)
	n := len(all)
	rep.Positions, rep.NonFinite = n, a.nonFinite
	rep.KLD = VerifyKLD{Mean: mean(all), P99: percentile(all, 0.99), P999: percentile(all, 0.999), Max: percentile(all, 1)}
	rep.Top1 = ratio(top1, n)
	rep.Accuracy = VerifyPair{Source: ratio(accS, n), Pack: ratio(accP, n)}
	if a.nonFinite > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d positions left out: a model's logits held a NaN or an infinity there", a.nonFinite))
	}
	rep.Layers = make([]VerifyLayer, len(a.hidden))
	for i, h := range a.hidden {
		l := VerifyLayer{Layer: i, RelErr: h.rel / float64(max(h.calls, 1)), Cosine: h.cos / float64(max(h.calls, 1))}
		if routes && h.routed > 0 {
			g := ratio(h.agree, h.routed)
			l.RouterAgreement = &g
		}
		rep.Layers[i] = l
	}
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}

// percentile is the nearest-rank q-quantile of sorted values (0 when empty).
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// configDiff names the first fields in which two configs differ ("" when
// equal; layout.ConfigDiff).
func configDiff(a, b *layout.Config) string {
	diffs := layout.ConfigDiff(a, b)
	if len(diffs) > 3 {
		diffs = append(diffs[:3], "…")
	}
	return strings.Join(diffs, ", ")
}
