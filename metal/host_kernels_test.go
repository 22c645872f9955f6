//go:build linux

package metal

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// The kernels of runtime/kernels, their Metal text run by the host engine,
// against plain Go computations. Tolerances are derived from the kernels'
// arithmetic (u = 2^-24, the unit roundoff; a sum of n f32 terms is within
// n·u·Σ|terms| of the exact one); bit-exact kernels are compared bit for bit.

// kernelTests run kernels of runtime/kernels on an engine.
var kernelTests = []struct {
	name string
	run  func(*testing.T, Engine)
}{
	{"RMSNorm", testRMSNorm},
	{"Categorical", testCategorical},
	{"RouterTopK", testRouterTopK},
	{"RouterGrouping", testRouterGrouping},
	{"Dequant", testDequant},
	{"AttnSoftmax", testAttnSoftmax},
	{"AttentionTiled", testAttentionTiled},
	{"ElementwiseExact", testElementwiseExact},
}

// TestHostKernels runs kernelTests on the host engine, with each way of
// running a group's threads (hostRuntimes).
func TestHostKernels(t *testing.T) {
	for _, rt := range hostRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			e := rt.engine(t)
			for _, kt := range kernelTests {
				t.Run(kt.name, func(t *testing.T) { kt.run(t, e) })
			}
		})
	}
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	return v
}

// testRMSNorm: y = x·(1/√(mean(x²)+eps))·w. Each square is rounded (u),
// the f32 sum of n of them is within n·u (relative: every term is
// positive), the mean, +eps, √ and the reciprocal add 4u (√ halves the
// sum's error), the two products 2u: |y − ref| ≤ (n/2 + 7)·u·|ref|.
func testRMSNorm(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct{ rows, n, threads int }{{5, 100, 64}, {3, 1000, 256}, {2, 33, 32}, {1, 4096, 1024}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%dx%d/%d", tc.rows, tc.n, tc.threads), func(t *testing.T) {
			x := randF32(rng, tc.rows*tc.n, 2)
			w := randF32(rng, tc.n, 1)
			const eps = 1e-6
			y := zeros[float32](t, e, len(x))
			run(t, e, "rmsnorm.kern", "rmsnorm_f32", grid(tc.rows, 1, 1), grid(tc.threads, 1, 1),
				buf(memOf(t, e, x)), buf(memOf(t, e, w)), buf(y), u32(uint32(tc.n)), f32(eps))
			got := valuesOf[float32](y)
			bound := (float64(tc.n)/2 + 7) * roundoff
			for r := range tc.rows {
				ss := 0.0
				for _, v := range x[r*tc.n : (r+1)*tc.n] {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Sqrt(ss/float64(tc.n)+eps)
				for i := range tc.n {
					ref := float64(x[r*tc.n+i]) * inv * float64(w[i])
					if d := math.Abs(float64(got[r*tc.n+i]) - ref); d > bound*math.Abs(ref) {
						t.Fatalf("y[%d][%d] = %g, want %g (|Δ| %.3g > %.3g)", r, i, got[r*tc.n+i], ref, d, bound*math.Abs(ref))
					}
				}
			}
		})
	}
}

// testCategorical: categorical_f32's draw is the first index whose
// cumulative weight exp(z − max) exceeds u·Σ. Its f32 weights and Kahan sums
// are within ~10 u of the float64 ones (relative to the total); draws are
// compared only where u·Σ is at least 1e-4·Σ from every cumulative weight,
// so they must be equal.
func testCategorical(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []struct{ rows, groups, v, threads int }{{6, 6, 50, 256}, {6, 3, 1000, 256}, {3, 3, 5000, 1024}, {2, 2, 7, 32}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%dx%d/%d", tc.rows, tc.v, tc.threads), func(t *testing.T) {
			z := randF32(rng, tc.rows*tc.v, 3)
			us := make([]float32, tc.rows)
			want := make([]int, tc.rows)
			for r := range tc.rows {
				for {
					us[r] = float32(rng.Float64())
					idx, margin := categoricalRef(z[r*tc.v:(r+1)*tc.v], float64(us[r]))
					if margin > 1e-4 {
						want[r] = idx
						break
					}
				}
			}
			out := zeros[float32](t, e, tc.rows)
			run(t, e, "sampler.kern", "categorical_f32", grid(tc.groups, 1, 1), grid(tc.threads, 1, 1),
				buf(memOf(t, e, z)), buf(memOf(t, e, us)), buf(out), u32(uint32(tc.rows)), u32(uint32(tc.v)))
			for r, g := range valuesOf[float32](out) {
				if int(g) != want[r] || float32(int(g)) != g {
					t.Errorf("row %d (u %g): drew %g, want %d", r, us[r], g, want[r])
				}
			}
		})
	}
}

// categoricalRef returns the draw of u from softmax(z) in float64 and the
// distance of u·Σ from the nearest cumulative weight, relative to Σ.
func categoricalRef(z []float32, u float64) (int, float64) {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, float64(v))
	}
	w := make([]float64, len(z))
	total := 0.0
	for i, v := range z {
		w[i] = math.Exp(float64(v) - mx)
		total += w[i]
	}
	target := u * total
	idx, cum, margin := len(z)-1, 0.0, math.Inf(1)
	found := false
	for i := range w {
		cum += w[i]
		margin = min(margin, math.Abs(cum-target)/total)
		if !found && cum > target {
			idx, found = i, true
		}
	}
	return idx, margin
}

// testRouterTopK: moe_topk_f32 picks the k most probable experts (exact:
// the logits are spaced 0.1 apart) and weights them p_i/Σ_sel p·pes_i. Each
// p_i is exp(z_i − max) (|Δ| ≤ (d + 2)·u relative, d the largest |z − max|)
// times one f32 reciprocal of the sum shared by all (cancels in the ratio)
// and rounded (u); the sum of k, the division and the product add k + 1 u:
// ≤ (2d + k + 8)·u relative.
func testRouterTopK(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, experts, k = 4, 64, 4
	logits := make([]float32, rows*experts)
	for r := range rows {
		perm := rng.Perm(experts)
		for i := range experts {
			logits[r*experts+i] = float32(perm[i])*0.1 - 3
		}
	}
	pes := make([]float32, experts)
	for i := range pes {
		pes[i] = float32(0.5 + rng.Float64())
	}
	idx := zeros[uint32](t, e, rows*k)
	wts := zeros[float32](t, e, rows*k)
	run(t, e, "router.kern", "moe_topk_f32", grid(rows, 1, 1), grid(64, 1, 1),
		buf(memOf(t, e, logits)), buf(memOf(t, e, pes)), buf(idx), buf(wts), u32(experts), u32(k))
	gotIdx, gotW := valuesOf[uint32](idx), valuesOf[float32](wts)
	d := 0.1 * float64(experts-1)
	bound := (2*d + k + 8) * roundoff
	for r := range rows {
		z := logits[r*experts : (r+1)*experts]
		order := make([]int, experts)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			if z[a] != z[b] {
				return cmpDesc(z[a], z[b])
			}
			return a - b
		})
		sel := 0.0
		for j := range k {
			sel += math.Exp(float64(z[order[j]]))
		}
		for j := range k {
			ex := order[j]
			if gotIdx[r*k+j] != uint32(ex) {
				t.Fatalf("row %d slot %d: expert %d, want %d", r, j, gotIdx[r*k+j], ex)
			}
			ref := math.Exp(float64(z[ex])) / sel * float64(pes[ex])
			if dd := math.Abs(float64(gotW[r*k+j]) - ref); dd > bound*ref {
				t.Errorf("row %d slot %d: weight %g, want %g (|Δ| %.3g > %.3g)", r, j, gotW[r*k+j], ref, dd, bound*ref)
			}
		}
	}
}

func cmpDesc(a, b float32) int {
	if a > b {
		return -1
	}
	return 1
}

// testRouterGrouping: moe_count_u32 and moe_scatter_u32 group the slots
// by expert (slots ascending) and cut each expert's run into tiles of at most
// bm pairs; integers, compared exactly.
func testRouterGrouping(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, experts, bm = 300, 10, 16
	idx := make([]uint32, n)
	for i := range idx {
		idx[i] = uint32(rng.IntN(experts))
	}
	idxM := memOf(t, e, idx)
	counts := zeros[uint32](t, e, experts)
	run(t, e, "router.kern", "moe_count_u32", grid(experts, 1, 1), grid(64, 1, 1), buf(idxM), buf(counts), u32(n))
	maxTiles := (n + experts*(bm-1)) / bm
	pairs := zeros[uint32](t, e, n)
	tiles := zeros[uint32](t, e, 1+3*maxTiles)
	run(t, e, "router.kern", "moe_scatter_u32", grid(experts, 1, 1), grid(128, 1, 1),
		buf(idxM), buf(counts), buf(pairs), buf(tiles), u32(n), u32(experts), u32(bm))

	wantCounts := make([]uint32, experts)
	var wantPairs []uint32
	wantTiles := []uint32{0}
	for ex := range uint32(experts) {
		first := uint32(len(wantPairs))
		for i, v := range idx {
			if v == ex {
				wantCounts[ex]++
				wantPairs = append(wantPairs, uint32(i))
			}
		}
		for j := uint32(0); j*bm < wantCounts[ex]; j++ {
			wantTiles = append(wantTiles, ex, first+j*bm, min(bm, wantCounts[ex]-j*bm))
			wantTiles[0]++
		}
	}
	if got := valuesOf[uint32](counts); !slices.Equal(got, wantCounts) {
		t.Errorf("counts = %v, want %v", got, wantCounts)
	}
	if got := valuesOf[uint32](pairs); !slices.Equal(got, wantPairs) {
		t.Errorf("pairs = %v, want %v", got, wantPairs)
	}
	if got := valuesOf[uint32](tiles)[:len(wantTiles)]; !slices.Equal(got, wantTiles) {
		t.Errorf("tiles = %v, want %v", got, wantTiles)
	}
}

// testDequant: a tensor encoded by codecs, re-laid into its planes by
// relayout.kern and decoded by dequant.kern is bit for bit what
// codecs.DecodeRows gives.
func testDequant(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(9, 10))
	tests := []struct {
		f      codecs.Format
		m      codecs.Matrix
		kernel string // dequant_affine_f32 also decodes q4
	}{
		{codecs.Q4, codecs.Matrix{Rows: 6, K: 128}, "dequant_q4_f32"},
		{codecs.Q4, codecs.Matrix{Rows: 3, K: 64}, "dequant_affine_f32"},
		{codecs.Q5, codecs.Matrix{Rows: 5, K: 96}, "dequant_affine_f32"},
		{codecs.Q6, codecs.Matrix{Rows: 4, K: 160}, "dequant_affine_f32"},
		{codecs.Q8, codecs.Matrix{Rows: 7, K: 37}, "dequant_q8_f32"},
		{codecs.NVFP4, codecs.Matrix{Rows: 8, K: 64, Mats: 2}, "dequant_nvfp4_f32"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s/%dx%d", tc.f, tc.kernel, tc.m.Rows, tc.m.K), func(t *testing.T) {
			src := randF32(rng, int(tc.m.Elements()), math.Exp(2*rng.NormFloat64()))
			enc, _, err := codecs.EncodeTensor(tc.f, codecs.F32, tc.m, codecs.Search, bytesOfF32(src))
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, tc.m.Elements())
			if err := codecs.DecodeRows(tc.f, codecs.F32, tc.m, enc, 0, tc.m.Rows, want); err != nil {
				t.Fatal(err)
			}
			rows, k := uint32(tc.m.Rows), uint32(tc.m.K)
			pack := memOf(t, e, enc)
			out := zeros[float32](t, e, int(tc.m.Elements()))
			g, th := grid(4, 1, 1), grid(64, 1, 1)
			switch tc.f {
			case codecs.Q4, codecs.Q5, codecs.Q6:
				bits := uint32(tc.f.Bits())
				codes := zeros[byte](t, e, int(rows*k*bits/8))
				deltas, mins := zeros[uint16](t, e, int(rows*k/32)), zeros[uint16](t, e, int(rows*k/32))
				run(t, e, "relayout.kern", "relayout_affine", g, th, buf(pack), buf(codes), buf(deltas), buf(mins), u32(rows), u32(k), u32(bits))
				args := []Arg{buf(codes), buf(deltas), buf(mins), buf(out), u32(rows), u32(k)}
				if tc.kernel == "dequant_affine_f32" {
					args = append(args, u32(bits))
				}
				run(t, e, "dequant.kern", tc.kernel, g, th, args...)
			case codecs.Q8:
				codes, scales := zeros[byte](t, e, int(rows*k)), zeros[float32](t, e, int(rows))
				run(t, e, "relayout.kern", "relayout_q8", g, th, buf(pack), buf(codes), buf(scales), u32(rows), u32(k))
				run(t, e, "dequant.kern", tc.kernel, g, th, buf(codes), buf(scales), buf(out), u32(rows), u32(k))
			case codecs.NVFP4:
				matRows := rows / uint32(tc.m.Matrices())
				codes, scales := zeros[byte](t, e, int(rows*k/2)), zeros[byte](t, e, int(rows*k/16))
				gscale := zeros[uint32](t, e, int(tc.m.Matrices()))
				run(t, e, "relayout.kern", "relayout_nvfp4", g, th, buf(pack), buf(codes), buf(scales), buf(gscale),
					u32(rows), u32(k), u32(0), u32(matRows), u64(0))
				run(t, e, "dequant.kern", tc.kernel, g, th, buf(codes), buf(scales), buf(gscale), buf(out),
					u32(rows), u32(k), u32(0), u32(matRows))
			}
			for i, v := range valuesOf[float32](out) {
				if math.Float32bits(v) != math.Float32bits(want[i]) && !(v != v && want[i] != want[i]) {
					t.Fatalf("element %d = %g (%#08x), want %g (%#08x)", i, v, math.Float32bits(v), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

func bytesOfF32(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = append(b, byte(math.Float32bits(x)), byte(math.Float32bits(x)>>8), byte(math.Float32bits(x)>>16), byte(math.Float32bits(x)>>24))
	}
	return b
}

// testAttnSoftmax: attn_softmax_f32 replaces each row by the softmax
// over its visible keys and 0 elsewhere. Per probability: the f32 difference
// s − max (relative error u, so exp's argument is off by ≤ d·u, d = the
// largest |s − max|), exp (≤ 2u), the f32 sum of tn terms (≤ tn·u, all
// positive), the reciprocal and the product (2u): ≤ (d + tn + 6)·u relative.
// Hidden keys must be exactly 0.
func testAttnSoftmax(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(11, 12))
	const kv, rows, group, tn, lo, qpos = 2, 3, 2, 40, 5, 20
	tests := []struct {
		name           string
		causal, window uint32
	}{{"bidirectional", 0, 0}, {"causal", 1, 0}, {"causal window", 1, 8}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := randF32(rng, kv*rows*group*tn, 3)
			m := memOf(t, e, s)
			run(t, e, "attn_softmax.kern", "attn_softmax_f32", grid(kv*rows*group, 1, 1), grid(64, 1, 1),
				buf(m), u32(rows), u32(group), u32(tn), u32(lo), u32(qpos), u32(tc.causal), u32(tc.window))
			got := valuesOf[float32](m)
			for row := range kv * rows * group {
				tq := (row / group) % rows
				jlo, jhi := 0, tn
				if tc.causal != 0 {
					p := qpos + tq
					jhi = min(p+1-lo, tn)
					if tc.window > 0 && p+1 > lo+int(tc.window) {
						jlo = p + 1 - int(tc.window) - lo
					}
				}
				x := s[row*tn : (row+1)*tn]
				mx := math.Inf(-1)
				for j := jlo; j < jhi; j++ {
					mx = max(mx, float64(x[j]))
				}
				sum, d := 0.0, 0.0
				for j := jlo; j < jhi; j++ {
					sum += math.Exp(float64(x[j]) - mx)
					d = max(d, mx-float64(x[j]))
				}
				bound := (d + tn + 6) * roundoff
				for j := range tn {
					g := float64(got[row*tn+j])
					if j < jlo || j >= jhi {
						if g != 0 {
							t.Fatalf("row %d key %d (hidden) = %g, want 0", row, j, g)
						}
						continue
					}
					ref := math.Exp(float64(x[j])-mx) / sum
					if dd := math.Abs(g - ref); dd > bound*ref {
						t.Fatalf("row %d key %d = %g, want %g (|Δ| %.3g > %.3g)", row, j, g, ref, dd, bound*ref)
					}
				}
			}
		})
	}
}

// testAttentionTiled runs the tiled attention (attn_tiles_f32 for the
// scores, attn_probs_f32, attn_tiles_f32 for P·V) against float64. A score
// is a sum of hd products (≤ hd·u·Σ|q·k|, call it E); exp of a difference
// of two scores is then off by ≤ 2E relative, plus the softmax's own
// (d + span + 6)·u (testAttnSoftmax); the output sums span products of
// P and v: |Δ| ≤ Σ_j P_j·|v_j| · (2E + (d + 2·span + 8)·u).
func testAttentionTiled(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(13, 14))
	const rows, heads, kvHeads, hd, span, keyStart = 5, 4, 2, 24, 70, 3
	const group = heads / kvHeads
	const queryPos = keyStart + span - rows
	tests := []struct {
		name           string
		causal, window int
	}{{"bidirectional", 0, 0}, {"causal", 1, 0}, {"causal window", 1, 20}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := randF32(rng, rows*heads*hd, 1)
			k := randF32(rng, (keyStart+span)*kvHeads*hd, 1)
			v := randF32(rng, (keyStart+span)*kvHeads*hd, 1)
			qM, kM, vM := memOf(t, e, q), memOf(t, e, k), memOf(t, e, v)
			sM := zeros[float32](t, e, heads*rows*span)
			out := zeros[float32](t, e, rows*heads*hd)
			rowTiles := (rows + 63) / 64
			shape := func(pv uint32) []Arg {
				return []Arg{u32(pv), u32(rows), u32(heads), u32(group), u32(hd), u32(span), i32(keyStart),
					u32(uint32(tc.causal)), i32(queryPos), i32(int32(tc.window))}
			}
			run(t, e, "attention.kern", "attn_tiles_f32", grid((span+63)/64, heads*rowTiles, 1), grid(256, 1, 1),
				append([]Arg{buf(qM), buf(kM), buf(sM)}, shape(0)...)...)
			run(t, e, "attention.kern", "attn_probs_f32", grid(rows*heads, 1, 1), grid(64, 1, 1),
				buf(sM), u32(rows), u32(heads), u32(span), i32(keyStart), u32(uint32(tc.causal)), i32(queryPos), i32(int32(tc.window)))
			run(t, e, "attention.kern", "attn_tiles_f32", grid((hd+63)/64, heads*rowTiles, 1), grid(256, 1, 1),
				append([]Arg{buf(sM), buf(vM), buf(out)}, shape(1)...)...)
			got := valuesOf[float32](out)
			for tq := range rows {
				lo, hi := 0, span
				if tc.causal != 0 {
					hi = queryPos + tq + 1 - keyStart
					if tc.window > 0 {
						lo = max(0, queryPos+tq-tc.window+1-keyStart)
					}
				}
				for h := range heads {
					g := h / group
					score := make([]float64, span)
					mx, eMax := math.Inf(-1), 0.0
					for j := lo; j < hi; j++ {
						abs := 0.0
						for d := range hd {
							a, b := float64(q[tq*heads*hd+h*hd+d]), float64(k[(keyStart+j)*kvHeads*hd+g*hd+d])
							score[j] += a * b
							abs += math.Abs(a * b)
						}
						mx = max(mx, score[j])
						eMax = max(eMax, hd*roundoff*abs)
					}
					sum, dd := 0.0, 0.0
					for j := lo; j < hi; j++ {
						sum += math.Exp(score[j] - mx)
						dd = max(dd, mx-score[j])
					}
					for d := range hd {
						ref, mag := 0.0, 0.0
						for j := lo; j < hi; j++ {
							p := math.Exp(score[j]-mx) / sum
							vv := float64(v[(keyStart+j)*kvHeads*hd+g*hd+d])
							ref += p * vv
							mag += p * math.Abs(vv)
						}
						bound := mag * (2*eMax + (dd+2*span+8)*roundoff)
						gv := float64(got[tq*heads*hd+h*hd+d])
						if diff := math.Abs(gv - ref); diff > bound {
							t.Fatalf("out[%d][%d·%d+%d] = %g, want %g (|Δ| %.3g > %.3g)", tq, h, hd, d, gv, ref, diff, bound)
						}
					}
				}
			}
		})
	}
}

// testElementwiseExact: AddScale, Temper and RoundBF16 round as the CPU
// reference (Go float32 with explicit conversions): bit for bit, subnormals,
// infinities and NaN included (the host build does not flush subnormals).
func testElementwiseExact(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(15, 16))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, math.SmallestNonzeroFloat32, math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1.00390625, 3.0000002}
	x := append(randF32(rng, 1000, 10), special...)
	y := append(randF32(rng, 1000, 10), special...)
	rng.Shuffle(len(y), func(i, j int) { y[i], y[j] = y[j], y[i] })
	n := uint64(len(x))
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	tests := []struct {
		name, kernel string
		args         func(xm Mem) []Arg
		want         func(i int) float32
	}{
		{"add_scale", "add_scale_f32", func(xm Mem) []Arg { return []Arg{buf(xm), buf(memOf(t, e, y)), u64(n), f32(0.7)} },
			func(i int) float32 { return float32(float32(x[i]+y[i]) * 0.7) }},
		{"temper", "temper_f32", func(xm Mem) []Arg { return []Arg{buf(xm), u64(n), f32(0.41)} },
			func(i int) float32 { return float32(x[i] / 0.41) }},
		{"round_bf16", "round_bf16_f32", func(xm Mem) []Arg { return []Arg{buf(xm), u64(n)} },
			func(i int) float32 {
				if x[i] != x[i] {
					return x[i]
				}
				b := math.Float32bits(x[i])
				b += 0x7fff + (b>>16)&1
				return math.Float32frombits(b & 0xffff0000)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			xm := memOf(t, e, x)
			run(t, e, "elementwise.kern", tc.kernel, grid(3, 1, 1), grid(128, 1, 1), tc.args(xm)...)
			for i, g := range valuesOf[float32](xm) {
				if w := tc.want(i); !same(g, w) {
					t.Fatalf("x[%d] = %g (%#08x) from %g, want %g (%#08x)", i, g, math.Float32bits(g), x[i], w, math.Float32bits(w))
				}
			}
		})
	}
}
