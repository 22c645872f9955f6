package cpu

// moeLayer is one layer's router and experts as MoE sees them (MODEL_SPEC
// §3.4, §3.5): H hidden, E experts, top K, F the expert width.
type moeLayer struct {
	H, E, K, F                  int
	eps, routerRoot             float32
	router, gateUp, expDown     *matrix // [E][H], [E·2F][H], [E·H][F]
	routerScale, perExpertScale []float32
}

// route is the router (MODEL_SPEC §3.4) on the un-normed residual x1
// ([S][H]): for each token the K selected experts (descending probability,
// ties to the lower index) and their weights (renormalized to sum 1, times
// per_expert_scale). When gaps is not nil, gaps[t] is lowered to token t's
// selection margin: its K-th probability minus the best one left out.
func (p *pool) route(l *moeLayer, x1 []float32, S int, gaps []float64) (idx []int, wts []float32) {
	H, E, K := l.H, l.E, l.K
	r := make([]float32, S*H)
	for t := range S {
		row := r[t*H : (t+1)*H]
		rmsNorm(x1[t*H:(t+1)*H], nil, row, l.eps)
		for i, v := range row {
			row[i] = (v * l.routerScale[i]) * l.routerRoot
		}
	}
	logits := make([]float32, S*E)
	p.matmul(l.router, 0, E, toF64(r, nil), S, logits, E)
	idx = make([]int, S*K)
	wts = make([]float32, S*K)
	probs := make([]float32, E)
	taken := make([]bool, E)
	for t := range S {
		softmax(logits[t*E:(t+1)*E], probs)
		clear(taken)
		var sum float64
		for j := range K {
			best := -1
			for e, p := range probs {
				if !taken[e] && (best < 0 || p > probs[best]) {
					best = e
				}
			}
			taken[best] = true
			idx[t*K+j] = best
			wts[t*K+j] = probs[best]
			sum += float64(probs[best])
		}
		s := float32(sum)
		for j := range K {
			wts[t*K+j] = (wts[t*K+j] / s) * l.perExpertScale[idx[t*K+j]]
		}
		if t < len(gaps) && K < E {
			// The margin of the selection: the K-th probability over the best
			// one left out.
			rest := float32(0)
			for e, p := range probs {
				if !taken[e] {
					rest = max(rest, p)
				}
			}
			gaps[t] = min(gaps[t], float64(probs[idx[t*K+K-1]]-rest))
		}
	}
	return idx, wts
}

// experts is the routed-experts branch (MODEL_SPEC §3.5) on the normed input
// u ([S][H]): Σₖ wₖ · down_e(gelu(gate_e(u)) ⊙ up_e(u)), each product and
// the sum in float32.
func (p *pool) experts(l *moeLayer, u []float32, S int, idx []int, wts []float32) []float32 {
	H, E, K, F := l.H, l.E, l.K, l.F
	// Group the (token, slot) pairs by expert, tokens ascending within one.
	count := make([]int, E+1)
	for _, e := range idx {
		count[e+1]++
	}
	for e := range E {
		count[e+1] += count[e]
	}
	off := append([]int(nil), count[:E]...)
	pairTok := make([]int, S*K)
	pairSlot := make([]int, S*K) // t·K + j of each pair
	pairW := make([]float32, S*K)
	for t := range S {
		for j := range K {
			e := idx[t*K+j]
			pairTok[off[e]] = t
			pairSlot[off[e]] = t*K + j
			pairW[off[e]] = wts[t*K+j]
			off[e]++
		}
	}
	P := S * K
	x := make([]float64, P*H)
	for p, t := range pairTok {
		for i, v := range u[t*H : (t+1)*H] {
			x[p*H+i] = float64(v)
		}
	}
	gu := make([]float32, P*2*F)
	var jobs []mmJob
	for e := range E {
		p0, n := count[e], count[e+1]-count[e]
		if n > 0 {
			jobs = append(jobs, mmJob{w: l.gateUp, r0: e * 2 * F, n: 2 * F, x: x[p0*H:], T: n, y: gu[p0*2*F:], ldy: 2 * F})
		}
	}
	p.matmuls(jobs)
	z := make([]float64, P*F)
	for p := range P {
		g, up := gu[p*2*F:p*2*F+F], gu[p*2*F+F:(p+1)*2*F]
		for i := range F {
			z[p*F+i] = float64(gelu(g[i]) * up[i])
		}
	}
	y := make([]float32, P*H)
	for i := range jobs {
		j := &jobs[i]
		e := j.r0 / (2 * F)
		p0 := count[e]
		*j = mmJob{w: l.expDown, r0: e * H, n: H, x: z[p0*F:], T: j.T, y: y[p0*H:], ldy: H}
	}
	p.matmuls(jobs)
	// Sum per token in top-k slot order (descending probability), as
	// transformers' default grouped experts path does (weighted outputs
	// reshaped to [S, K, H] and summed over K).
	slot := make([]int, P) // pair index of (token, slot)
	for p := range P {
		slot[pairSlot[p]] = p
	}
	out := make([]float32, S*H)
	for t := range S {
		o := out[t*H : (t+1)*H]
		for j := range K {
			p := slot[t*K+j]
			w := pairW[p]
			for i, v := range y[p*H : (p+1)*H] {
				o[i] += float32(v * w)
			}
		}
	}
	return out
}
