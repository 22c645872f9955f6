package codecs

import "math"

// Importance-weighted searching encoder for the bf16 affine groups of
// q4/q5/q6 (the layout and decoder of search_affine.go). Every element x_i
// of a group (i = 0..31) carries a weight w_i > 0, finite: the weight of
// its column in the row (Encoder.SetImportance). The search minimizes the
// weighted error
//
//	E_w(d, m) = Σ_i float64(w_i · float64(e_i·e_i)),  e_i = float64(dec_i) − float64(x_i),
//
// summed in float64 in element order, over the candidates of the unweighted
// search (search_affine.go), in the same order, each judged by its stored
// bf16 pair: the best E_w wins, on equal E_w the earlier candidate. A code
// is the lowest error-minimizing code of its element for the candidate's
// stored pair, as without weights (a weight scales an element's error, it
// does not move the nearest code). What the weights change:
//
//   - the group sums: Σw, Σw·x (float64(w_i·x_i) added in element order)
//     instead of 32 and Σx;
//   - the least-squares fit to codes q_i (the three grids and the refit):
//     with wq_i = float64(w_i·q_i) and, in element order, S = Σw,
//     Sq = Σ wq_i, Sqq = Σ float64(wq_i·q_i), Sqx = Σ float64(wq_i·x_i),
//     Sx = Σ float64(w_i·x_i):
//     den = float64(S·Sqq) − float64(Sq·Sq), skipped unless den > 0;
//     d = (float64(S·Sqx) − float64(Sq·Sx)) / den, at least 0, rounded to
//     bf16 (nearest even, saturating); m = (Sx − float64(d̂·Sq)) / S with the
//     rounded d̂, rounded to bf16; then sanitized like the unweighted fit;
//   - the comparison of candidates: E_w instead of Σ err² (the early exit of
//     a partial sum stays exact: the terms are ≥ 0);
//   - the safety net's mean: bf16(Sx/S).
//
// The grids (min, max, clipped ranges), the engine's pair and the local
// search's neighbours do not depend on the weights. With every weight 1
// each of these quantities is bit for bit its unweighted counterpart
// (w·v = v exactly, S = 32 exactly, and the unweighted fit divides by 32
// too), so the pair, the codes and the plain terms are exactly those of the
// unweighted search, and E_w is its Σ err² (TestSearchAffineWUniform).
//
// Only the engine's pair is a candidate of both searches, so a group's E_w
// is not always below E_w of the unweighted search's choice; on the
// benchmark matrices with lognormal column weights (σ = 1.5) the weighted
// search lowers the total E_w by about 30% for q4, q5 and q6 and is worse
// in 1–3% of the groups (TestSearchAffineWQuality).
//
// A group's results: the bf16 pair, the codes, the plain terms of the
// unweighted search for that pair (Σ float64(e_i·e_i), Σ float64(x_i·x_i),
// max |e_i|, each in element order) and the weighted terms
// Σ float64(w_i·float64(e_i·e_i)) and Σ float64(w_i·float64(x_i·x_i)). Rows
// merge group sums in group order (Stats.SumWSqErr, Stats.SumWSqRef).
//
// searchAffineGroupsW runs many groups; on amd64 with AVX-512 it hands
// batches of 8 groups to the kernel searchAffine8W (search_affine_amd64.s),
// which gives bit-identical results; lanes it cannot decide exactly are
// redone here.

// affineResultW is the result of a weighted group search: the unweighted
// fields for the chosen pair and the weighted error and reference.
type affineResultW struct {
	affineResult
	sumWSqErr, sumWSqRef float64
}

// swGroup is saGroup with the weights of the group's elements.
type swGroup struct {
	saGroup
	w   [32]float64 // weights
	sw  float64     // Σw, element order
	swx float64     // Σ w·x, element order
}

// tryW is try with the weighted error.
func (g *swGroup) tryW(d, m uint16, seed *[32]float64) bool {
	c := &g.st[0]
	var bound float64
	if g.best < 0 {
		bound = math.Inf(1)
	} else {
		c = &g.st[1-g.best]
		bound = g.st[g.best].sse
	}
	if saPlain {
		seed, bound = nil, math.Inf(1)
	}
	var ok bool
	if seed != nil {
		ok = g.evalFromW(seed, c, d, m, bound)
	} else {
		ok = g.evalW(c, d, m, bound)
	}
	if !ok || g.best >= 0 && !(c.sse < g.st[g.best].sse) {
		return false
	}
	g.wins++
	if g.best < 0 {
		g.best = 0
	} else {
		g.best = 1 - g.best
	}
	return true
}

// evalW is eval with the weighted error in c.sse.
func (g *swGroup) evalW(c *saState, d, m uint16, bound float64) bool {
	df, mf := BF16ToFloat32(d), BF16ToFloat32(m)
	m64, d64 := float64(mf), float64(df)
	c.d, c.m, c.d64, c.m64 = d, m, d64, m64
	top := float64(float64(g.nmaxf*d64) + m64)
	var sse float64
	switch {
	case d == 0:
		for i, xv := range &g.x {
			e := m64 - xv
			c.q[i] = 0
			sse += float64(g.w[i] * float64(e*e))
		}
	case !g.fastOK(df, mf, top):
		sse = g.evalSlowW(c, df, mf)
	default:
		inv := 1 / d64
		var guess [32]float64
		for i, xv := range &g.x {
			q := int64(float64(float64((xv-m64)*inv)) + 0.5)
			guess[i] = float64(min(max(q, 0), g.nmax))
		}
		return g.scoreFromW(&guess, c, d64, m64, bound)
	}
	c.sse = sse
	return sse < bound
}

// evalFromW is evalFrom with the weighted error.
func (g *swGroup) evalFromW(seed *[32]float64, c *saState, d, m uint16, bound float64) bool {
	df, mf := BF16ToFloat32(d), BF16ToFloat32(m)
	m64, d64 := float64(mf), float64(df)
	top := float64(float64(g.nmaxf*d64) + m64)
	if d == 0 || !g.fastOK(df, mf, top) {
		return g.evalW(c, d, m, bound)
	}
	c.d, c.m, c.d64, c.m64 = d, m, d64, m64
	return g.scoreFromW(seed, c, d64, m64, bound)
}

// scoreFromW is scoreFrom with the weighted error.
func (g *swGroup) scoreFromW(seed *[32]float64, c *saState, d64, m64, bound float64) bool {
	hd := d64 * 0.5
	hd2 := float64(hd * hd)
	var sse float64
	for i, xv := range &g.x {
		qf := seed[i]
		e := float64(float64(qf*d64)+m64) - xv
		ee := float64(e * e)
		if ee >= hd2 {
			qf, ee = saFix(qf, e, xv, m64, d64, g.nmaxf)
		}
		c.q[i] = qf
		sse += float64(g.w[i] * ee)
		if sse >= bound {
			return false
		}
	}
	c.sse = sse
	return sse < bound
}

// evalSlowW is evalSlow with the weighted error.
func (g *swGroup) evalSlowW(c *saState, df, mf float32) (sse float64) {
	var tbl [64]float64
	n := int(g.nmax) + 1
	for q := range n {
		tbl[q] = float64(float32(float32(float32(q)*df) + mf))
	}
	for i, xv := range &g.x {
		bq, be := 0, tbl[0]-xv
		for q := 1; q < n; q++ {
			if e := tbl[q] - xv; math.Abs(e) < math.Abs(be) {
				bq, be = q, e
			}
		}
		c.q[i] = float64(bq)
		sse += float64(g.w[i] * float64(be*be))
	}
	return sse
}

// lsCandW tries the weighted least-squares pair for codes with the weighted
// sums sq = Σ w·q, sqq = Σ (w·q)·q, sqx = Σ (w·q)·x (see the top of the
// file).
func (g *swGroup) lsCandW(sq, sqq, sqx float64, seed *[32]float64) {
	den := float64(g.sw*sqq) - float64(sq*sq)
	if !(den > 0) {
		return
	}
	d := (float64(g.sw*sqx) - float64(sq*g.swx)) / den
	db := bf16Sat(max(d, 0))
	m := (g.swx - float64(float64(BF16ToFloat32(db))*sq)) / g.sw
	db, mb := g.sanitize(db, bf16Sat(m))
	g.tryW(db, mb, seed)
}

// searchAffineGroupW is searchAffineGroup minimizing the error weighted by
// w (finite weights > 0): it returns the stored pair, the plain and the
// weighted error terms, and the codes in codes.
func searchAffineGroupW(bits int, x *[32]float32, w *[32]float64, codes *[32]uint8) affineResultW {
	return saSearchW(bits, x, w, codes)
}

func saSearchW(bits int, x *[32]float32, w *[32]float64, codes *[32]uint8) (res affineResultW) {
	var g swGroup
	g.best = -1
	g.nmax = int64(1)<<bits - 1
	g.nmaxf = float64(g.nmax)
	g.nmax32 = float32(g.nmax)
	g.lo, g.hi = float64(x[0]), float64(x[0])
	g.lx = saNoLsb
	g.w = *w
	var ref, wref float64
	for i, v := range x {
		xv, wv := float64(v), w[i]
		g.x[i] = xv
		if xv < g.lo {
			g.lo = xv
		}
		if xv > g.hi {
			g.hi = xv
		}
		g.lx = min(g.lx, lsbExp(v))
		g.sw += wv
		g.swx += float64(wv * xv)
		xx := float64(xv * xv)
		ref += xx
		wref += float64(wv * xx)
	}
	g.ax = max(-g.lo, g.hi)

	// The three grids' codes (as in saSearch) and their weighted sums.
	rng := g.hi - g.lo
	var gq [3][32]float64
	var sq, sqq, sqx [3]float64
	if rng > 0 {
		c := saClip[bits-4]
		s := float64(g.nmaxf / rng)
		lo0, lo2 := g.lo, g.lo+float64(c*rng)
		inv0, inv1 := s, float64(s/(1-c))
		nmax := g.nmax
		for i, xv := range &g.x {
			wv := g.w[i]
			q0 := float64(min(max(int64(float64(float64((xv-lo0)*inv0))+0.5), 0), nmax))
			q1 := float64(min(max(int64(float64(float64((xv-lo0)*inv1))+0.5), 0), nmax))
			q2 := float64(min(max(int64(float64(float64((xv-lo2)*inv1))+0.5), 0), nmax))
			gq[0][i], gq[1][i], gq[2][i] = q0, q1, q2
			for k, q := range [3]float64{q0, q1, q2} {
				wq := float64(wv * q)
				sq[k] += wq
				sqq[k] += float64(wq * q)
				sqx[k] += float64(wq * xv)
			}
		}
	}

	// 1. The engine's pair.
	if ed, em := engineAffinePair(g.nmax32, float32(g.lo), float32(g.hi)); g.valid(ed, em) {
		if rng > 0 {
			g.tryW(ed, em, &gq[0])
		} else {
			g.tryW(ed, em, nil)
		}
	}

	// 2. Weighted least-squares fits to the grids' codes.
	if rng > 0 {
		for k := range 3 {
			g.lsCandW(sq[k], sqq[k], sqx[k], &gq[k])
		}
	}
	if g.best < 0 {
		g.tryW(0, bf16Sat(g.swx/g.sw), nil) // the weighted mean (decodes finitely)
	}

	// 3. Refits to the codes of the best.
	for range saRefits {
		b := &g.st[g.best]
		var sq, sqq, sqx float64
		for i, qf := range &b.q {
			wq := float64(g.w[i] * qf)
			sq += wq
			sqq += float64(wq * qf)
			sqx += float64(wq * g.x[i])
		}
		prev := g.wins
		g.lsCandW(sq, sqq, sqx, &b.q)
		if g.wins == prev {
			break
		}
	}

	// 4. Local search over the bf16 neighbours.
	for range saLocal {
		b := &g.st[g.best]
		cd, cm := b.d, b.m
		prev := g.wins
		for _, nb := range [...][2]uint16{
			{cd, bf16Up(cm)}, {cd, bf16Down(cm)}, {bf16Up(cd), cm}, {bf16Down(cd), cm},
		} {
			if g.valid(nb[0], nb[1]) {
				g.tryW(nb[0], nb[1], &g.st[g.best].q)
			}
		}
		if g.wins == prev {
			break
		}
	}

	b := &g.st[g.best]
	df, mf := BF16ToFloat32(b.d), BF16ToFloat32(b.m)
	var sse, maxAbs float64
	for i, v := range x {
		q := uint8(b.q[i])
		codes[i] = q
		e := float64(float32(float32(float32(q)*df)+mf)) - float64(v)
		sse += float64(e * e)
		maxAbs = max(maxAbs, math.Abs(e))
	}
	return affineResultW{affineResult{b.d, b.m, sse, ref, maxAbs}, b.sse, wref}
}

// searchAffineGroupsW is searchAffineGroupW for the len(x)/32 consecutive
// groups of x, which are groups first, first+1, … of rows of len(w) values
// (wrapping to the next row): group g takes the weights
// w[c·32 : c·32+32], c = (first+g) mod (len(w)/32). Where the CPU allows
// it, batches of 8 groups run in an AVX-512 kernel with bit-identical
// results.
func searchAffineGroupsW(bits int, x []float32, w []float64, first int, codes []uint8, res []affineResultW) {
	n := len(x) / 32
	gpr := len(w) / 32
	codes, res = codes[:32*n], res[:n]
	for g := searchAffineGroupsWFast(bits, x, w, first, codes, res); g < n; g++ {
		c := (first + g) % gpr * 32
		res[g] = saSearchW(bits, (*[32]float32)(x[g*32:g*32+32]), (*[32]float64)(w[c:c+32]), (*[32]uint8)(codes[g*32:g*32+32]))
	}
}

// searchAffineRowsW is searchAffineRows with importance: src holds whole
// rows of len(w) finite values (a multiple of 32), every row weighted by w
// (finite, > 0). It returns the plain statistics of the chosen encoding
// (as searchAffineRows computes them) and the weighted ones, merged in group
// order.
func searchAffineRowsW(dt DType, bits int, dst, src []byte, w []float64) Stats {
	var st Stats
	searchAffineRowsWTo(&st, dt, bits, dst, src, w)
	return st
}

// searchAffineRowsWTo is searchAffineRowsW merging every group's terms into
// st in group order (so that runs of rows with different weights, encoded
// one after the other, sum exactly as one unweighted call over all of them
// would).
func searchAffineRowsWTo(st *Stats, dt DType, bits int, dst, src []byte, w []float64) {
	bb := 4 + 4*bits
	gpr := len(w) / 32
	total := len(src) / dt.Size() / 32
	band := min(total, searchAffineRowsBand)
	x := make([]float32, 32*band)
	codes := make([]uint8, 32*band)
	res := make([]affineResultW, band)
	for g0 := 0; g0 < total; g0 += band {
		n := min(band, total-g0)
		toFloat32(dt, src[g0*32*dt.Size():], x[:32*n])
		searchAffineGroupsW(bits, x[:32*n], w, g0%gpr, codes[:32*n], res[:n])
		for g, r := range res[:n] {
			st.mergeGroup(r.sumSqErr, r.sumSqRef, r.maxAbsErr, 32)
			st.SumWSqErr += r.sumWSqErr
			st.SumWSqRef += r.sumWSqRef
			putAffineBlock(dst[(g0+g)*bb:(g0+g+1)*bb], r.delta, r.min, (*[32]uint8)(codes[g*32:]), bits)
		}
	}
}
