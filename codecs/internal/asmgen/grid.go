package main

// Exact vectorized Stats sums.
//
// Stats.add accumulates SumSqErr and SumSqRef one element at a time: a
// chain of dependent float64 additions, the critical path of an encoder
// that is otherwise vectorized. While the running sum s stays in one binade
// [2^E, 2^(E+1)), every step rounds to the same grid u = 2^(E−52), so
// fl(s + a) = s + RN_u(a) for a term a ≥ 0, unless a is exactly halfway
// between two multiples of u (a tie, where the rounding depends on the
// parity of s). The kernels therefore compute RN_u(a) = (a + 2^E) − 2^E for
// every term of a batch independently, add those multiples of u in any
// order (exactly, as long as the total stays below 2^(E+1)), and add the
// total to s: the result is the sequential sum, bit for bit, provided that
//
//   - s is normal and not huge (64 ≤ its biased exponent ≤ 2000),
//   - s + the batch total < 2^(E+1)·(1 − 2^-32) (so every partial sum stays
//     in the binade; the margin covers the rounding of a total that is not
//     exact, which can then only be larger), and
//   - no term is a tie: max |RN_u(a) − a| < u/2.
//
// Otherwise the kernel adds the terms one by one in element order.

// gridSetup loads C = 2^E of the float64 at off(st) into every lane of
// register c and zeroes the accumulators acc (Σ RN_u) and md (max |RN_u(a) − a|).
func gridSetup(st string, off, c, acc, md int) {
	p("MOVQ %d(%s), AX", off, st)
	p("SHRQ $52, AX")
	p("SHLQ $52, AX")
	p("VPBROADCASTQ AX, %s", z(c))
	zero(acc, md)
}

// gridAdd accumulates the eight float64 terms in register a; t is scratch.
func gridAdd(ch *chain, a, c, acc, md, t int) {
	ch.p("VADDPD %s, %s, %s", z(c), z(a), z(t))
	ch.p("VSUBPD %s, %s, %s", z(c), z(t), z(t)) // RN_u(a)
	ch.p("VADDPD %s, %s, %s", z(t), z(acc), z(acc))
	ch.p("VSUBPD %s, %s, %s", z(a), z(t), z(t))
	ch.p("VRANGEPD $11, %s, %s, %s", z(t), z(md), z(md))
}

// reducePD leaves op (VADDPD or VMAXPD) over the 8 lanes of register r in
// the low lane of X(r); t is scratch.
func reducePD(op string, r, t int) {
	p("VEXTRACTF64X4 $1, %s, %s", z(r), y(t))
	p("%s %s, %s, %s", op, y(t), y(r), y(r))
	p("VEXTRACTF32X4 $1, %s, X%d", y(r), t)
	p("%s X%d, X%d, X%d", op, t, r, r)
	p("VPERMILPD $1, X%d, X%d", r, t)
	p("%s X%d, X%d, X%d", op, t, r, r)
}

func reduceMaxPD(r, t int) { reducePD("VMAXPD", r, t) }

// gridCheck checks the binade conditions for the sums at base(st) and
// base+8(st) (SumSqErr and SumSqRef for base 0) given the batch totals in
// the low lanes of X(totErr) and X(totRef), and jumps to fail if one does not hold. Otherwise it leaves
// the sums in X6 and X7 and their u/2 in X4 and X5. It clobbers AX, BX, CX,
// X1 and X3.
func gridCheck(st string, base, totErr, totRef int, fail string) {
	for i, tot := range []int{totErr, totRef} {
		off := base + 8*i
		p("MOVQ %d(%s), AX", off, st)
		p("MOVQ AX, BX")
		p("SHRQ $52, BX")
		p("CMPQ BX, $64")
		p("JCS %s", fail)
		p("CMPQ BX, $2000")
		p("JHI %s", fail)
		p("VMOVQ AX, X%d", 6+i)
		p("VADDSD X%d, X%d, X1", tot, 6+i) // s + total
		p("LEAQ 1(BX), CX")
		p("SHLQ $52, CX")
		p("SUBQ $0x200000, CX") // 2^(E+1)·(1 − 2^-32)
		p("VMOVQ CX, X3")
		p("VUCOMISD X3, X1")
		p("JCC %s", fail)
		p("LEAQ -53(BX), CX")
		p("SHLQ $52, CX") // u/2
		p("VMOVQ CX, X%d", 4+i)
	}
}
