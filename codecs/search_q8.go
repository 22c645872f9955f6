package codecs

import (
	"math"
	"sync"
)

// Searching encoder for the engine's q8 row layout: per row one bf16 scale
// s > 0 and int8 codes q ∈ [−127, 127], decoded as float32(q)·s (one float32
// rounding, which is exact: q has 7 significant bits and s 8).
//
// As for the affine groups, every candidate scale is judged by what would be
// stored: its bf16 bits, the error-minimizing code of every element for
// that scale (on a tie between two codes, the one nearer 0) and the true
// error Σ (float64(dec) − float64(x))² in float64, summed in element order;
// the first of equal errors wins. With a = max|x| the candidates are, in
// order:
//
//  1. the engine's own scale: a/127 in float32 (1 when a < 1e-8) truncated
//     to bf16, so the result is never worse than the engine's encoder;
//  2. f·a/127 rounded to bf16 (nearest even) for the clipping factors f in
//     sq8Factors;
//  3. up to sq8Refits least-squares refits Σq·x/Σq² for the codes of the
//     best scale, rounded to bf16;
//  4. a local search: the two bf16 neighbours (±1 ulp) of the best scale,
//     then further steps in the direction of the one that won while they
//     improve (at most sq8Local more).
//
// Candidates are kept in the range where 127·s is finite, so every code
// decodes to a finite value. As in the affine search, an evaluation stops
// once its partial sum reaches the best error, which changes no result.
//
// With importance weights w_k (searchQ8RowW) the same candidates are
// generated in the same order and judged the same way, except that a
// candidate's error is the weighted Σ float64(w_k·float64(err_k²)), summed
// in element order, and the refits of step 3 are the weighted least-squares
// scales Σ float64(w_k·float64(q_k·x_k)) / Σ float64(w_k·float64(q_k·q_k)).
// The codes of a scale do not depend on the weights. A row whose weights
// are all equal is searched without them (the same minimization, without
// the rounding of the weighted sums), so uniform weights give exactly the
// unweighted result; with every w_k = 1 the weighted sums would also be bit
// for bit the unweighted ones.

var sq8Factors = [...]float64{1, 0.9, 0.8}

const (
	sq8Refits = 2
	sq8Local  = 4
)

// sq8Scratch holds the code buffers of one row search.
type sq8Scratch struct {
	q [2][]int8
}

var sq8Pool = sync.Pool{New: func() any { return new(sq8Scratch) }}

// sq8Row is one row being searched.
type sq8Row struct {
	x    []float32
	w    []float64 // importance weights (nil: unweighted)
	amax float64
	ref  float64   // Σ float64(x²) in element order
	lx   int       // lowest set bit (lsbExp) among the values, saNoLsb if all are 0
	q    [2][]int8 // the best codes and the candidate's
	s    [2]uint16 // their scales
	sse  [2]float64
	best int // index of the best in q, −1 before the first
	wins int
}

// sq8Valid: s is a finite positive bf16 whose 127·s is finite.
func sq8Valid(s uint16) bool {
	return s != 0 && s < 0x7f80 && float32(127*BF16ToFloat32(s)) <= math.MaxFloat32
}

// sq8Fix moves the code q, with error e = q·s − x, to the error-minimizing
// code nearest 0 and returns it with its squared error, when the errors of
// x are exact in float64.
//
//go:noinline
func sq8Fix(q, e, x, s float64) (float64, float64) {
	hs := s * 0.5
	for e > hs && q > -127 {
		q--
		e = float64(q*s) - x
	}
	for e < -hs && q < 127 {
		q++
		e = float64(q*s) - x
	}
	if e == hs && q > 0 { // q−1 is as good and nearer 0
		q--
		e = float64(q*s) - x
	} else if e == -hs && q < 0 { // likewise q+1
		q++
		e = float64(q*s) - x
	}
	return q, float64(e * e)
}

// try evaluates the valid scale s and makes it the best when its error is
// smaller.
func (r *sq8Row) try(s uint16) bool {
	ci := 0
	bound := math.Inf(1)
	if r.best >= 0 {
		ci = 1 - r.best
		bound = r.sse[r.best]
	}
	if saPlain {
		bound = math.Inf(1)
	}
	var sse float64
	var ok bool
	if r.w != nil {
		sse, ok = r.evalW(s, r.q[ci], bound)
	} else {
		sse, ok = r.eval(s, r.q[ci], bound)
	}
	if !ok || r.best >= 0 && !(sse < r.sse[r.best]) {
		return false
	}
	r.s[ci], r.sse[ci], r.best = s, sse, ci
	r.wins++
	return true
}

// eval computes the codes of scale s into q and returns the squared error;
// ok is false when the partial sum reached bound (q is then incomplete).
func (r *sq8Row) eval(s uint16, q []int8, bound float64) (sse float64, ok bool) {
	s64 := float64(BF16ToFloat32(s))
	hs := s64 * 0.5
	hs2 := float64(hs * hs)
	x := r.x
	q = q[:len(x)]
	inv := 1 / s64
	s32 := BF16ToFloat32(s)
	// Fast path: every error q·s − x is exact in float64 (all are multiples
	// of 2^l, l the lowest set bit among s and the values, of magnitude at
	// most amax + 127·s < 2^(l+52)), so comparing errors compares the real
	// distances; and t = x/s is below 2^50 in magnitude, so the rounding
	// constant gives t rounded to nearest even.
	if r.amax+float64(127*s64) < pow2(min(r.lx, lsbExp(s32))+52) && float64(r.amax*inv) < 0x1p50 {
		for i, v := range x {
			xv := float64(v)
			qf := float64(float64(xv*inv)+0x1.8p52) - 0x1.8p52
			if qf > 127 {
				qf = 127
			}
			if qf < -127 {
				qf = -127
			}
			e := float64(qf*s64) - xv
			ee := float64(e * e)
			if ee >= hs2 {
				qf, ee = sq8Fix(qf, e, xv, s64)
			}
			q[i] = int8(qf)
			sse += ee
			if sse >= bound {
				return sse, false
			}
		}
		return sse, sse < bound
	}
	for i, v := range x {
		qf, ee := sq8Code(v, s32)
		q[i] = int8(qf)
		sse += ee
		if sse >= bound {
			return sse, false
		}
	}
	return sse, sse < bound
}

// evalW is eval with the weighted error Σ float64(w·err²) (same codes).
func (r *sq8Row) evalW(s uint16, q []int8, bound float64) (sse float64, ok bool) {
	s64 := float64(BF16ToFloat32(s))
	hs := s64 * 0.5
	hs2 := float64(hs * hs)
	x, w := r.x, r.w
	q = q[:len(x)]
	w = w[:len(x)]
	inv := 1 / s64
	s32 := BF16ToFloat32(s)
	if r.amax+float64(127*s64) < pow2(min(r.lx, lsbExp(s32))+52) && float64(r.amax*inv) < 0x1p50 {
		for i, v := range x {
			xv := float64(v)
			qf := float64(float64(xv*inv)+0x1.8p52) - 0x1.8p52
			if qf > 127 {
				qf = 127
			}
			if qf < -127 {
				qf = -127
			}
			e := float64(qf*s64) - xv
			ee := float64(e * e)
			if ee >= hs2 {
				qf, ee = sq8Fix(qf, e, xv, s64)
			}
			q[i] = int8(qf)
			sse += float64(w[i] * ee)
			if sse >= bound {
				return sse, false
			}
		}
		return sse, sse < bound
	}
	for i, v := range x {
		qf, ee := sq8Code(v, s32)
		q[i] = int8(qf)
		sse += float64(w[i] * ee)
		if sse >= bound {
			return sse, false
		}
	}
	return sse, sse < bound
}

// sq8Code is the error-minimizing code of x for the scale s (nearest 0 on
// ties) and its squared error, for any finite x and valid s: by the fast
// path's method when the errors of x are exact, else by trying every code.
func sq8Code(x, s float32) (float64, float64) {
	xv, s64 := float64(x), float64(s)
	if math.Abs(xv)+float64(127*s64) < pow2(min(lsbExp(x), lsbExp(s))+52) {
		qf := min(max(math.RoundToEven(xv/s64), -127), 127)
		e := float64(qf*s64) - xv
		if ee := float64(e * e); ee < float64(float64(s64*0.5)*float64(s64*0.5)) {
			return qf, ee
		}
		return sq8Fix(qf, e, xv, s64)
	}
	bq, be := 0.0, math.Abs(xv)
	for m := 1.0; m <= 127; m++ {
		for _, qf := range [2]float64{m, -m} {
			if e := math.Abs(float64(qf*s64) - xv); e < be {
				bq, be = qf, e
			}
		}
	}
	return bq, float64(be * be)
}

// cand tries the bf16 rounding of the scale v (skipped when not valid).
func (r *sq8Row) cand(v float64) {
	if s := bf16Sat(v); sq8Valid(s) {
		r.try(s)
	}
}

// searchQ8Row chooses the stored bf16 row scale and the int8 codes of one row (finite values),
// minimizing the squared error of float32(q)*scale, and returns the same error terms.
func searchQ8Row(x []float32, codes []int8) (scale uint16, sumSqErr, sumSqRef, maxAbsErr float64) {
	codes = codes[:len(x)]
	sc := sq8Pool.Get().(*sq8Scratch)
	defer sq8Pool.Put(sc)
	r := newSq8Row(x, nil, sc)
	r.search()
	sumSqRef = r.ref
	scale = r.s[r.best]
	s32 := BF16ToFloat32(scale)
	for i, c := range r.q[r.best] {
		codes[i] = c
		e := float64(float32(float32(c)*s32)) - float64(x[i])
		sumSqErr += float64(e * e)
		if a := math.Abs(e); a > maxAbsErr {
			maxAbsErr = a
		}
	}
	return scale, sumSqErr, sumSqRef, maxAbsErr
}

// searchQ8RowW is searchQ8Row minimizing the weighted squared error
// Σ w_k·err_k² (w: one finite weight > 0 per value); a row whose weights
// are all equal gets the unweighted search (the same choice, without the
// rounding of the weighted sums). Besides the plain error terms, computed
// as searchQ8Row does, it returns the row's weighted sums Σ w·err² and
// Σ w·x² (terms float64(w·float64(err²)) and float64(w·float64(x²)),
// summed in element order).
func searchQ8RowW(x []float32, w []float64, codes []int8) (scale uint16, sumSqErr, sumSqRef, maxAbsErr, sumWSqErr, sumWSqRef float64) {
	codes = codes[:len(x)]
	w = w[:len(x)]
	sc := sq8Pool.Get().(*sq8Scratch)
	defer sq8Pool.Put(sc)
	uniform := true
	for _, v := range w {
		uniform = uniform && v == w[0]
	}
	rw := w
	if uniform {
		rw = nil
	}
	r := newSq8Row(x, rw, sc)
	r.search()
	scale, sumSqRef = r.s[r.best], r.ref
	s32 := BF16ToFloat32(scale)
	for i, c := range r.q[r.best] {
		codes[i] = c
		e := float64(float32(float32(c)*s32)) - float64(x[i])
		rr := float64(float64(x[i]) * float64(x[i]))
		sumSqErr += float64(e * e)
		sumWSqErr += float64(w[i] * float64(e*e))
		sumWSqRef += float64(w[i] * rr)
		if a := math.Abs(e); a > maxAbsErr {
			maxAbsErr = a
		}
	}
	return
}

// newSq8Row prepares the search of row x (weights w, nil for none) with the
// code buffers of sc.
func newSq8Row(x []float32, w []float64, sc *sq8Scratch) sq8Row {
	for k := range sc.q {
		if cap(sc.q[k]) < len(x) {
			sc.q[k] = make([]int8, len(x))
		}
	}
	var amax32 float32
	var ref float64
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if a > amax32 {
			amax32 = a
		}
		ref += float64(float64(v) * float64(v))
	}
	r := sq8Row{x: x, w: w, amax: float64(amax32), ref: ref, lx: saNoLsb, q: [2][]int8{sc.q[0][:len(x)], sc.q[1][:len(x)]}, best: -1}
	for _, v := range x {
		r.lx = min(r.lx, lsbExp(v))
	}
	return r
}

// search runs the candidates 1–4; the result is r.s[r.best], r.q[r.best].
func (r *sq8Row) search() {
	x, w := r.x, r.w
	amax32 := float32(r.amax)
	// 1. The engine's scale.
	es := float32(1)
	if !(amax32 < 1e-8) {
		es = amax32 / 127
	}
	if s := uint16(math.Float32bits(es) >> 16); sq8Valid(s) {
		r.try(s)
	}
	// 2. Clipping factors.
	base := r.amax / 127
	for _, f := range sq8Factors {
		r.cand(float64(f * base))
	}
	if r.best < 0 {
		// Only an all-zero row (or one below the bf16 range) gets here:
		// the smallest scale, all codes 0.
		r.try(0x0001)
	}
	// 3. Least-squares refits (weighted with importance).
	for range sq8Refits {
		var qx, qq float64
		if w == nil {
			for i, c := range r.q[r.best] {
				qf := float64(c)
				qx += float64(qf * float64(x[i]))
				qq += float64(qf * qf)
			}
		} else {
			for i, c := range r.q[r.best] {
				qf := float64(c)
				qx += float64(w[i] * float64(qf*float64(x[i])))
				qq += float64(w[i] * float64(qf*qf))
			}
		}
		if qq == 0 {
			break
		}
		prev := r.wins
		r.cand(qx / qq)
		if r.wins == prev {
			break
		}
	}
	// 4. Local search over the bf16 neighbours: both neighbours of the best,
	// then on in the direction of the one that won, while that improves.
	s0 := r.s[r.best]
	up, down := bf16Up(s0), bf16Down(s0)
	if sq8Valid(up) {
		r.try(up)
	}
	if sq8Valid(down) {
		r.try(down)
	}
	if s := r.s[r.best]; s != s0 {
		step := bf16Up
		if s == down {
			step = bf16Down
		}
		for range sq8Local {
			n := step(r.s[r.best])
			if !sq8Valid(n) || !r.try(n) {
				break
			}
		}
	}
}
