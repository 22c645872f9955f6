//go:build amd64 && !purego

package codecs

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX-512 kernel searchAffine8 (search_affine_amd64.s) runs the search
// of searchAffineGroup for 8 groups at once, one group per float64 lane,
// with the same candidates in the same order and the same float64/float32
// operations, so its results are bit-identical to the reference:
//
//   - the stats, grid sums, least-squares fits, bf16 roundings, validity
//     checks and neighbours are the reference's operations, lane by lane;
//   - every candidate is evaluated in full (the reference's shortcuts change
//     no result), except in lanes whose best error is already 0 (nothing
//     is strictly better); the refit always runs, and the second round of
//     the local search unless no lane moved in the first (repeating a refit
//     or round that changed nothing changes nothing);
//   - a code is found from the guess rne(clamp((x − m)/d, 0, nmax)), which
//     is within one of the best code, by one step up or down and the tie
//     rule, which gives the lowest error-minimizing code exactly when the
//     reference's fast path applies (fastOK: exact decoded values and
//     errors). Lanes where that does not hold for some candidate, where a
//     least-squares pair would need sanitize, or without any candidate
//     after the grids are reported and redone by the reference (on the
//     benchmark matrices: none).
//
// TestSearchAffineGroupsFast compares both on the benchmark matrices and
// on adversarial groups mixed into the same batches.

// sa8 is the kernel's batch; the offsets are hard-coded in the assembly.
type sa8 struct {
	x      [32][8]float64 // element j of each lane's group
	best   [32][8]float64 // out: the best codes
	cand   [32][8]float64 // scratch
	lo     [8]float64
	hi     [8]float64
	sx     [8]float64
	ax     [8]float64
	ref    [8]float64 // out: Σx²
	lx     [16]int32
	sse    [8]float64 // out: Σ err²
	bd     [16]uint32 // out: bf16 delta (lanes 0..7)
	bm     [16]uint32 // out: bf16 min
	maxe   [8]float64 // out: max |err|
	sums   [9][8]float64
	ctrd   [16]uint32
	ctrm   [16]uint32
	nmax   float64
	clip   float64
	onemc  float64
	nmax32 float32
	_      [4]byte
}

// searchAffine8 searches the 8 groups of 32 values at src (x is filled from
// src), writes their codes (32 bytes per group) to dst and the other
// results to b, and returns the lanes to redo.
//
//go:noescape
func searchAffine8(b *sa8, src *float32, dst *byte) uint8

// searchAffine8OK: the kernel needs AVX-512 F, DQ (mask byte ops), CD
// (VPLZCNTD) and VL (32-bit lanes in Y registers).
var searchAffine8OK = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512CD && cpu.X86.HasAVX512VL

func init() {
	var b sa8
	offs := [...]uintptr{
		unsafe.Offsetof(b.x), unsafe.Offsetof(b.best), unsafe.Offsetof(b.cand), unsafe.Offsetof(b.lo),
		unsafe.Offsetof(b.hi), unsafe.Offsetof(b.sx), unsafe.Offsetof(b.ax), unsafe.Offsetof(b.ref),
		unsafe.Offsetof(b.lx), unsafe.Offsetof(b.sse), unsafe.Offsetof(b.bd), unsafe.Offsetof(b.bm),
		unsafe.Offsetof(b.maxe), unsafe.Offsetof(b.sums), unsafe.Offsetof(b.ctrd), unsafe.Offsetof(b.ctrm),
		unsafe.Offsetof(b.nmax), unsafe.Offsetof(b.clip), unsafe.Offsetof(b.onemc), unsafe.Offsetof(b.nmax32),
	}
	want := [...]uintptr{0, 2048, 4096, 6144, 6208, 6272, 6336, 6400, 6464, 6528, 6592, 6656, 6720, 6784,
		7360, 7424, 7488, 7496, 7504, 7512}
	if offs != want {
		panic("codecs: sa8 layout does not match search_affine_amd64.s")
	}
}

// searchAffineGroupsFast runs searchAffineGroup on groups [0, n) of x (32
// values each) with the kernel, 8 at a time, and returns how many it did
// (a multiple of 8); res and codes receive the results.
func searchAffineGroupsFast(bits int, x []float32, codes []uint8, res []affineResult) int {
	if !searchAffine8OK {
		return 0
	}
	n := len(x) / 32 / 8 * 8
	var b sa8
	nmax := float64(int(1)<<bits - 1)
	c := saClip[bits-4]
	b.nmax, b.clip, b.onemc, b.nmax32 = nmax, c, 1-c, float32(nmax)
	for g0 := 0; g0 < n; g0 += 8 {
		xs, cs := x[g0*32:g0*32+256], codes[g0*32:g0*32+256]
		fail := searchAffine8(&b, &xs[0], &cs[0])
		for l := range 8 {
			g := g0 + l
			if fail&(1<<l) != 0 {
				r := &res[g]
				r.delta, r.min, r.sumSqErr, r.sumSqRef, r.maxAbsErr = saSearch(bits, (*[32]float32)(x[g*32:g*32+32]), (*[32]uint8)(codes[g*32:g*32+32]))
				continue
			}
			res[g] = affineResult{uint16(b.bd[l]), uint16(b.bm[l]), b.sse[l], b.ref[l], b.maxe[l]}
		}
	}
	return n
}

// The weighted kernel searchAffine8W runs saSearchW for 8 groups at once in
// the same way: the unweighted kernel's candidates, checks and evaluation,
// with the weighted sums and least-squares fits of search_affine_w.go and
// the weighted error (each term float64(w·float64(e·e)), summed in element
// order) as the score; the plain error of the chosen pair is summed in a
// last pass. The same lanes are redone by the reference.
// TestSearchAffineGroupsWFast compares both.

// sa8w is the weighted kernel's batch: sa8 (same offsets) and the weights.
type sa8w struct {
	sa8
	w    [32][8]float64 // weight of element j of each lane's group
	sw   [8]float64     // Σw
	wref [8]float64     // out: Σ w·x²
	psse [8]float64     // out: plain Σ err² of the best
	widx [8]int32       // in: index in the weights of each lane's element 0
}

// searchAffine8W is searchAffine8 with weights: lane l's element j has the
// weight w[b.widx[l]+j].
//
//go:noescape
func searchAffine8W(b *sa8w, src *float32, w *float64, dst *byte) uint8

func init() {
	var b sa8w
	offs := [...]uintptr{unsafe.Offsetof(b.w), unsafe.Offsetof(b.sw), unsafe.Offsetof(b.wref), unsafe.Offsetof(b.psse), unsafe.Offsetof(b.widx)}
	if offs != [...]uintptr{7520, 9568, 9632, 9696, 9760} {
		panic("codecs: sa8w layout does not match search_affine_amd64.s")
	}
}

// searchAffineGroupsWFast runs searchAffineGroupW on groups [0, n) of x with
// the kernel, 8 at a time (group g weighted as in searchAffineGroupsW), and
// returns how many it did (a multiple of 8).
func searchAffineGroupsWFast(bits int, x []float32, w []float64, first int, codes []uint8, res []affineResultW) int {
	gpr := len(w) / 32
	if !searchAffine8OK || gpr == 0 || len(w) > math.MaxInt32 {
		return 0
	}
	n := len(x) / 32 / 8 * 8
	var b sa8w
	nmax := float64(int(1)<<bits - 1)
	c := saClip[bits-4]
	b.nmax, b.clip, b.onemc, b.nmax32 = nmax, c, 1-c, float32(nmax)
	col := first % gpr
	for g0 := 0; g0 < n; g0 += 8 {
		for l := range 8 {
			b.widx[l] = int32(col * 32)
			if col++; col == gpr {
				col = 0
			}
		}
		xs, cs := x[g0*32:g0*32+256], codes[g0*32:g0*32+256]
		fail := searchAffine8W(&b, &xs[0], &w[0], &cs[0])
		for l := range 8 {
			g := g0 + l
			if fail&(1<<l) != 0 {
				wc := int(b.widx[l])
				res[g] = saSearchW(bits, (*[32]float32)(x[g*32:g*32+32]), (*[32]float64)(w[wc:wc+32]), (*[32]uint8)(codes[g*32:g*32+32]))
				continue
			}
			res[g] = affineResultW{affineResult{uint16(b.bd[l]), uint16(b.bm[l]), b.psse[l], b.ref[l], b.maxe[l]}, b.sse[l], b.wref[l]}
		}
	}
	return n
}
