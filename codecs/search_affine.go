package codecs

import (
	"math"
	"math/bits"
)

// Searching encoder for the bf16 affine group layout of the q4/q5/q6 blocks:
// per group of 32 values a bf16 delta d ≥ 0, a bf16 min m and b-bit codes
// q ∈ [0, 2^b−1], decoded as float32(float32(q)·d) + m (two float32
// roundings, no FMA).
//
// Every candidate (d, m) is judged by what would be stored: its bf16 bits,
// the error-minimizing code of every element for exactly those values (the
// lowest code q minimizing |float64(dec(q)) − float64(x)|) and the true
// error Σ (float64(dec) − float64(x))², summed in float64 in element order.
// The best candidate wins; on equal errors the earlier one. The candidates,
// in order:
//
//  1. the engine's own pair: bf16-truncated (max−min)/nmax (1 when
//     max−min < 1e-8) and min, so the result is never worse than the
//     engine's encoder (whose codes are not even the best ones for its
//     stored values);
//  2. for three grids derived from the group's min and max (the full range,
//     the range clipped by a fraction c at the top, and clipped by c at the
//     bottom; c = 3%, 1.5%, 0.75% for 4, 5, 6 bits), the least-squares
//     (d, m) for the grid's codes: d rounded to bf16 (nearest even), then m
//     re-solved for that rounded d and rounded;
//  3. saRefits least-squares refits, likewise rounded, for the codes of the
//     best candidate so far;
//  4. saLocal rounds of a local search: the four bf16 neighbours (±1 ulp
//     of m, ±1 ulp of d) of the best pair at the start of the round.
//
// A least-squares candidate whose largest decoded value would overflow
// float32 is moved inside the range first (sanitize), and other pairs that
// would overflow are skipped, so every result decodes to finite values. Products are wrapped in explicit conversions so that no compiler
// fuses a multiply-add, and the bytes are the same on every architecture.
//
// searchAffineGroups runs the search on many groups; on amd64 with AVX-512
// it hands batches of 8 groups to a kernel with bit-identical results
// (search_affine_amd64.go).
//
// Evaluating a candidate costs a pass over the group. Two shortcuts keep the
// result bit for bit the same as a plain evaluation (saPlain turns them off
// for the tests): a pass stops once its partial sum reaches the best error
// (a sum of nonnegative terms only grows), and a pass starts from guessed
// codes (the grid's codes for the engine's pair and the grid fits, the best
// pair's codes for the refits and neighbours), so that most codes are only
// confirmed (their error is below half a step) instead of computed.

// saClip is the clipping fraction of the grids for 4, 5 and 6 bits.
var saClip = [3]float64{0.03, 0.015, 0.0075}

const (
	saRefits = 1 // least-squares refits of the best
	saLocal  = 2 // rounds of the ±1 ulp local search
)

// saState is one evaluated candidate.
type saState struct {
	d, m     uint16      // bf16 bits
	d64, m64 float64     // their values
	sse      float64     // Σ err², element order
	q        [32]float64 // codes
}

// saGroup is one group prepared for the evaluation of candidates.
type saGroup struct {
	x      [32]float64 // the values, widened exactly
	nmax   int64       // 2^b − 1
	nmaxf  float64     // float64(nmax)
	nmax32 float32     // float32(nmax)
	lo, hi float64     // min and max of x
	ax     float64     // max |x|
	lx     int         // lowest set bit (lsbExp) among the values, saNoLsb if all are 0
	sx     float64     // Σx in element order
	st     [2]saState  // the best and the candidate being evaluated
	best   int         // index of the best state in st, −1 before the first
	wins   int         // number of candidates that became the best
}

// saPlain disables the two evaluation shortcuts (tests check that they do
// not change any result).
var saPlain = false

// saNoLsb stands for "no nonzero value" in lsb exponents.
const saNoLsb = 1 << 20

// bf16Sat rounds v to the nearest bfloat16 (via float32, ties to even),
// saturating to ±the largest finite bf16; NaN gives +0.
func bf16Sat(v float64) uint16 {
	if v != v {
		return 0
	}
	b := Float32ToBF16(float32(v))
	if b&0x7fff >= 0x7f80 {
		b = b&0x8000 | 0x7f7f
	}
	return b
}

// bf16Up and bf16Down are the next bf16 above and below the finite b (they
// stay at ±the largest finite value; ±0 step to the smallest subnormals).
func bf16Up(b uint16) uint16 {
	switch {
	case b == 0x7f7f:
		return b
	case b == 0x8000:
		return 0x0001
	case b&0x8000 != 0:
		return b - 1
	}
	return b + 1
}

func bf16Down(b uint16) uint16 {
	switch {
	case b == 0xff7f:
		return b
	case b == 0x0000:
		return 0x8001
	case b&0x8000 != 0:
		return b + 1
	}
	return b - 1
}

// bf16AtMost is the largest finite bf16 ≤ v (v ≥ −max finite bf16).
func bf16AtMost(v float64) uint16 {
	b := bf16Sat(v)
	for float64(BF16ToFloat32(b)) > v && b != 0xff7f {
		b = bf16Down(b)
	}
	return b
}

// lsbExp is the exponent of the lowest set bit of f, saNoLsb for ±0.
func lsbExp(f float32) int {
	u := math.Float32bits(f) & 0x7fffffff
	e := int(u >> 23)
	switch {
	case u == 0:
		return saNoLsb
	case e == 0:
		return -149 + bits.TrailingZeros32(u)
	}
	return e - 150 + bits.TrailingZeros32(u&0x7fffff|0x800000)
}

// pow2 is 2^k for −1022 ≤ k ≤ 1023 (clamped).
func pow2(k int) float64 {
	k = min(max(k, -1022), 1023)
	return math.Float64frombits(uint64(k+1023) << 52)
}

// fastOK reports whether the pair (d > 0, m) allows the fast evaluation:
//
//   - m + q·d is exactly representable in float32 for every q in [0, nmax]
//     (every such value is a multiple of 2^l, l = min(lsb d, lsb m) ≥ −149,
//     exact below 2^(l+24) in magnitude), so the decoder's two roundings are
//     exact and the decoded values are the affine m + q·d;
//   - every error dec − x is exact in float64 (a multiple of 2^l', l' the
//     lowest set bit among d, m and the group's values, of magnitude at most
//     A = max|x| + |m| + nmax·d < 2^(l'+52)), so comparing errors compares
//     the real distances.
//
// top is m + nmax·d in float64.
func (g *saGroup) fastOK(d, m float32, top float64) bool {
	l := min(lsbExp(d), lsbExp(m))
	lim := pow2(l + 24)
	if !(math.Abs(float64(m)) < lim && math.Abs(top) < lim) {
		return false
	}
	l = min(l, g.lx)
	a := g.ax + math.Abs(float64(m)) + float64(g.nmaxf*float64(d))
	return a < pow2(l+52)
}

// valid reports whether the bf16 pair decodes to finite values: d a finite
// value ≥ +0, m finite, and float32(float32(nmax·d) + m) finite.
func (g *saGroup) valid(d, m uint16) bool {
	if d >= 0x7f80 || m&0x7fff >= 0x7f80 {
		return false
	}
	top := float32(float32(g.nmax32*BF16ToFloat32(d)) + BF16ToFloat32(m))
	return top <= math.MaxFloat32
}

// sanitize moves a pair (d ≥ 0 finite, m finite) inside the float32 range:
// d is lowered until nmax·d is finite, then m until the largest decoded
// value is finite.
func (g *saGroup) sanitize(d, m uint16) (uint16, uint16) {
	if g.valid(d, m) {
		return d, m
	}
	if float32(g.nmax32*BF16ToFloat32(d)) > math.MaxFloat32 {
		d = bf16AtMost(math.MaxFloat32 / g.nmaxf) // then nmax·d ≤ MaxFloat32
	}
	if !g.valid(d, m) {
		m = bf16AtMost(math.MaxFloat32 - float64(float32(g.nmax32*BF16ToFloat32(d))))
		for !g.valid(d, m) {
			m = bf16Down(m)
		}
	}
	return d, m
}

// try evaluates the candidate (d, m) (finite-decoding) and makes it the best
// when its error is smaller. seed, when not nil, holds first guesses of the
// codes (any values in [0, nmax]).
func (g *saGroup) try(d, m uint16, seed *[32]float64) bool {
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
		ok = g.evalFrom(seed, c, d, m, bound)
	} else {
		ok = g.eval(c, d, m, bound)
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

// eval evaluates the pair (d, m) into c. It returns false as soon as the
// partial sum of squared errors reaches bound (then c is left incomplete).
func (g *saGroup) eval(c *saState, d, m uint16, bound float64) bool {
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
			sse += float64(e * e)
		}
	case !g.fastOK(df, mf, top):
		sse = g.evalSlow(c, df, mf)
	default:
		inv := 1 / d64
		var guess [32]float64
		for i, xv := range &g.x {
			// A first guess, at most one away from the best code (the guess
			// of a |t| beyond the int64 range is corrected by saFix).
			q := int64(float64(float64((xv-m64)*inv)) + 0.5)
			guess[i] = float64(min(max(q, 0), g.nmax))
		}
		return g.scoreFrom(&guess, c, d64, m64, bound)
	}
	c.sse = sse
	return sse < bound
}

// evalFrom evaluates the pair (d, m) into c like eval, but takes seed as
// first guesses of the codes: when fastOK, the error of a guess is computed
// directly, and only the elements where it reaches half a step need a new
// code (saFix finds the best code from any start). Otherwise it falls back
// to eval.
func (g *saGroup) evalFrom(seed *[32]float64, c *saState, d, m uint16, bound float64) bool {
	df, mf := BF16ToFloat32(d), BF16ToFloat32(m)
	m64, d64 := float64(mf), float64(df)
	top := float64(float64(g.nmaxf*d64) + m64)
	if d == 0 || !g.fastOK(df, mf, top) {
		return g.eval(c, d, m, bound)
	}
	c.d, c.m, c.d64, c.m64 = d, m, d64, m64
	return g.scoreFrom(seed, c, d64, m64, bound)
}

// scoreFrom is the fast evaluation (fastOK) from first guesses of the codes:
// the error of a guess is computed directly and only the elements where it
// reaches half a step get a new code from saFix.
func (g *saGroup) scoreFrom(seed *[32]float64, c *saState, d64, m64, bound float64) bool {
	hd := d64 * 0.5
	hd2 := float64(hd * hd)
	var sse float64
	for i, xv := range &g.x {
		qf := seed[i]
		e := float64(float64(qf*d64)+m64) - xv
		ee := float64(e * e)
		if ee >= hd2 { // |e| ≥ d/2 (or just below): a neighbour may be as good
			qf, ee = saFix(qf, e, xv, m64, d64, g.nmaxf)
		}
		c.q[i] = qf
		sse += ee
		if sse >= bound {
			return false
		}
	}
	c.sse = sse
	return sse < bound
}

// saFix moves the code q, with error e = dec(q) − x, to the lowest
// error-minimizing code when fastOK (d > 0; decoded values m + q·d and
// errors exact):
// any code whose error lies in (−d/2, d/2) is the unique best; at −d/2 it is
// the lower of two equal ones, at +d/2 the code below is. It returns the
// code and its squared error.
//
//go:noinline
func saFix(q, e, x, m, d, nmax float64) (float64, float64) {
	hd := d * 0.5
	for e > hd && q > 0 {
		q--
		e = float64(float64(q*d)+m) - x
	}
	for e < -hd && q < nmax {
		q++
		e = float64(float64(q*d)+m) - x
	}
	if e == hd && q > 0 {
		q--
		e = float64(float64(q*d)+m) - x
	}
	return q, float64(e * e)
}

// evalSlow is eval when not fastOK: every code is tried.
func (g *saGroup) evalSlow(c *saState, df, mf float32) (sse float64) {
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
		sse += float64(be * be)
	}
	return sse
}

// lsCand tries the least-squares solution for codes with sums Σq, Σq², Σq·x:
// d = (32·Σqx − Σq·Σx)/(32·Σq² − (Σq)²) (at least 0) rounded to bf16, then
// m = (Σx − d·Σq)/32 with the rounded d, rounded to bf16.
func (g *saGroup) lsCand(sq, sqq, sqx float64, seed *[32]float64) {
	den := float64(32*sqq) - float64(sq*sq) // exact: integers below 2^53
	if den == 0 {
		return
	}
	d := (float64(32*sqx) - float64(sq*g.sx)) / den
	db := bf16Sat(max(d, 0))
	m := (g.sx - float64(float64(BF16ToFloat32(db))*sq)) / 32
	db, mb := g.sanitize(db, bf16Sat(m))
	g.try(db, mb, seed)
}

// engineAffinePair is the bf16 (delta, min) that the engine's encoder
// stores for a group with minimum mn and maximum mx: delta = (max−min)/nmax
// in float32 (1 when max−min < 1e-8) and min, both truncated to bf16.
func engineAffinePair(nmax, mn, mx float32) (d, m uint16) {
	delta := float32(1)
	if r := mx - mn; !(r < 1e-8) {
		delta = r / nmax
	}
	return uint16(math.Float32bits(delta) >> 16), uint16(math.Float32bits(mn) >> 16)
}

// searchAffineGroup chooses the stored bf16 delta and min and the codes of one 32-element group
// (all values finite) for codes of the given bit width (4, 5 or 6), minimizing the squared error
// of the decoded group float32(float32(q)*delta)+min. It returns the bf16 bits and the group's
// float64 error terms (Σ err², Σ ref², max |err|, err = float64(dec) − float64(x)).
func searchAffineGroup(bits int, x *[32]float32, codes *[32]uint8) (delta, min uint16, sumSqErr, sumSqRef, maxAbsErr float64) {
	return saSearch(bits, x, codes)
}

// affineResult is what searchAffineGroup returns for one group.
type affineResult struct {
	delta, min                    uint16
	sumSqErr, sumSqRef, maxAbsErr float64
}

// searchAffineGroups is searchAffineGroup for the len(x)/32 consecutive
// groups of x: codes receives 32 codes per group and res the other results.
// Where the CPU allows it, batches of 8 groups run in an AVX-512 kernel with
// bit-identical results.
func searchAffineGroups(bits int, x []float32, codes []uint8, res []affineResult) {
	n := len(x) / 32
	codes, res = codes[:32*n], res[:n]
	for g := searchAffineGroupsFast(bits, x, codes, res); g < n; g++ {
		r := &res[g]
		r.delta, r.min, r.sumSqErr, r.sumSqRef, r.maxAbsErr = saSearch(bits, (*[32]float32)(x[g*32:g*32+32]), (*[32]uint8)(codes[g*32:g*32+32]))
	}
}

func saSearch(bits int, x *[32]float32, codes *[32]uint8) (delta, mn uint16, sumSqErr, sumSqRef, maxAbsErr float64) {
	var g saGroup
	g.best = -1
	g.nmax = int64(1)<<bits - 1
	g.nmaxf = float64(g.nmax)
	g.nmax32 = float32(g.nmax)
	g.lo, g.hi = float64(x[0]), float64(x[0])
	g.lx = saNoLsb
	for i, v := range x {
		xv := float64(v)
		g.x[i] = xv
		if xv < g.lo {
			g.lo = xv
		}
		if xv > g.hi {
			g.hi = xv
		}
		g.lx = min(g.lx, lsbExp(v))
		g.sx += xv
		sumSqRef += float64(xv * xv)
	}
	g.ax = max(-g.lo, g.hi)

	// The codes of three grids derived from the min and max: the full range
	// (the engine's own unrounded grid), the range clipped at the top and the
	// range clipped at the bottom. They seed the evaluations below.
	rng := g.hi - g.lo
	var gq [3][32]float64
	var sq, sqq, sqx [3]float64
	if rng > 0 {
		c := saClip[bits-4]
		s := float64(g.nmaxf / rng)
		lo0, lo2 := g.lo, g.lo+float64(c*rng)
		inv0, inv1 := s, float64(s/(1-c))
		nmax := g.nmax
		var sq0, sqq0, sqx0, sq1, sqq1, sqx1, sq2, sqq2, sqx2 float64
		for i, xv := range &g.x {
			q0 := float64(min(max(int64(float64(float64((xv-lo0)*inv0))+0.5), 0), nmax))
			q1 := float64(min(max(int64(float64(float64((xv-lo0)*inv1))+0.5), 0), nmax))
			q2 := float64(min(max(int64(float64(float64((xv-lo2)*inv1))+0.5), 0), nmax))
			gq[0][i], gq[1][i], gq[2][i] = q0, q1, q2
			sq0 += q0
			sq1 += q1
			sq2 += q2
			sqq0 += float64(q0 * q0)
			sqq1 += float64(q1 * q1)
			sqq2 += float64(q2 * q2)
			sqx0 += float64(q0 * xv)
			sqx1 += float64(q1 * xv)
			sqx2 += float64(q2 * xv)
		}
		sq = [3]float64{sq0, sq1, sq2}
		sqq = [3]float64{sqq0, sqq1, sqq2}
		sqx = [3]float64{sqx0, sqx1, sqx2}
	}

	// 1. The engine's pair.
	if ed, em := engineAffinePair(g.nmax32, float32(g.lo), float32(g.hi)); g.valid(ed, em) {
		if rng > 0 {
			g.try(ed, em, &gq[0])
		} else {
			g.try(ed, em, nil)
		}
	}

	// 2. Least-squares fits to the grids' codes.
	if rng > 0 {
		for k := range 3 {
			g.lsCand(sq[k], sqq[k], sqx[k], &gq[k])
		}
	}
	if g.best < 0 {
		// A safety net (every candidate above decodes finitely, so one of
		// them is taken): the mean, which always decodes finitely.
		g.try(0, bf16Sat(g.sx/32), nil)
	}

	// 3. Refits to the codes of the best.
	for range saRefits {
		b := &g.st[g.best]
		var sq, sqq, sqx float64
		for i, qf := range &b.q {
			sq += qf
			sqq += float64(qf * qf)
			sqx += float64(qf * g.x[i])
		}
		prev := g.wins
		g.lsCand(sq, sqq, sqx, &b.q)
		if g.wins == prev {
			break // the same codes would give the same refit again
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
				g.try(nb[0], nb[1], &g.st[g.best].q)
			}
		}
		if g.wins == prev {
			break // nothing moved: the next round would try the same pairs
		}
	}

	b := &g.st[g.best]
	df, mf := BF16ToFloat32(b.d), BF16ToFloat32(b.m)
	for i, v := range x {
		q := uint8(b.q[i])
		codes[i] = q
		dec := float32(float32(float32(q)*df) + mf)
		maxAbsErr = max(maxAbsErr, math.Abs(float64(dec)-float64(v)))
	}
	return b.d, b.m, b.sse, sumSqRef, maxAbsErr
}
