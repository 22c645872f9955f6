//go:build linux

package metal

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

// The Metal-specific kernels (metal/kernels) and the host's SIMD-group
// matrices, against Go.

func init() {
	kernelTests = append(kernelTests,
		struct {
			name string
			run  func(*testing.T, Engine)
		}{"SimdgroupMatrix", testSimdgroupMatrix},
		struct {
			name string
			run  func(*testing.T, Engine)
		}{"GEMM", testGEMM},
		struct {
			name string
			run  func(*testing.T, Engine)
		}{"CopyFill", testCopyFill},
		struct {
			name string
			run  func(*testing.T, Engine)
		}{"MoEExpertSimdgroup", testMoEExpertSG},
	)
	// Each SIMD group multiplies its own pair of 8×8 matrices twice:
	// c = a·b + 0.5, then c = a·(a·b + 0.5) + c, stored with a row stride
	// of 12 through threadgroup memory and back (device → threadgroup →
	// device, loads and stores of both address spaces).
	testUnits["simdgroup.kern"] = `
KERNEL(sg_mma, CBUF(float, a, 0), CBUF(float, b, 1), BUF(float, c, 2)) {
	SHARED(float, t, 4 * 8 * 12);
	u32 s = SIMD_ID;
	simdgroup_float8x8 ma;
	simdgroup_float8x8 mb;
	simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.5f);
	simdgroup_load(ma, a + s * 64u, 8u);
	simdgroup_load(mb, b + s * 64u);
	simdgroup_multiply_accumulate(acc, ma, mb, acc);
	simdgroup_float8x8 ab;
	simdgroup_multiply(ab, ma, mb);
	simdgroup_multiply_accumulate(acc, ma, acc, acc);
	simdgroup_store(acc, t + s * 96u, 12u);
	BARRIER();
	simdgroup_float8x8 back;
	simdgroup_load(back, t + s * 96u, 12u);
	simdgroup_store(back, c + s * 128u, 8u);
	simdgroup_store(ab, c + s * 128u + 64u);
}

KERNEL(sg_divergent, BUF(float, c, 0)) {
	simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
	if (LANE_ID < 16u) simdgroup_store(m, c);
	c[64u + LOCAL_ID_X] = 1.0f;
}
`
}

// mat8 is an 8×8 row-major matrix product a·b + c in float64 (exact on the
// small integers the test uses).
func mat8(a, b, c []float64) []float64 {
	d := make([]float64, 64)
	for r := range 8 {
		for j := range 8 {
			s := c[r*8+j]
			for k := range 8 {
				s += a[r*8+k] * b[k*8+j]
			}
			d[r*8+j] = s
		}
	}
	return d
}

// testSimdgroupMatrix: the host's SIMD-group matrices load with a row
// stride, multiply as d = a·b + c (not b·a: the operands are not
// symmetric), fill, and store with a row stride, from and to device and
// threadgroup memory; every SIMD group its own, a partial last one (40
// threads: 32 + 8 lanes) included. The values are small integers, so every
// sum is exact and the comparison is bit for bit.
func testSimdgroupMatrix(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(41, 42))
	const groups = 2 // SIMD groups
	a, b := make([]float32, groups*64), make([]float32, groups*64)
	for i := range a {
		a[i], b[i] = float32(rng.IntN(7)-3), float32(rng.IntN(7)-3)
	}
	c := zeros[float32](t, e, groups*128)
	run(t, e, "simdgroup.kern", "sg_mma", grid(1, 1, 1), grid(40, 1, 1), buf(memOf(t, e, a)), buf(memOf(t, e, b)), buf(c))
	got := valuesOf[float32](c)
	f64 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	half := slices.Repeat([]float64{0.5}, 64)
	for s := range groups {
		ma, mb := f64(a[s*64:(s+1)*64]), f64(b[s*64:(s+1)*64])
		acc := mat8(ma, mb, half)
		acc = mat8(ma, acc, acc)
		ab := mat8(ma, mb, make([]float64, 64))
		for i := range 64 {
			if float64(got[s*128+i]) != acc[i] || float64(got[s*128+64+i]) != ab[i] {
				t.Fatalf("SIMD group %d element %d: %g and %g, want %g and %g", s, i, got[s*128+i], got[s*128+64+i], acc[i], ab[i])
			}
		}
	}
	// Half the lanes storing is a divergence.
	p, err := e.Pipeline("simdgroup.kern", "sg_divergent")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(p, grid(1, 1, 1), grid(32, 1, 1), buf(zeros[float32](t, e, 96))); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(); err == nil {
		t.Error("a simdgroup_store by half the lanes ran")
	}
}

// gemmRef is c = a·W in float64 and Σ|a·W| per output: W(j, l) = w[j][l]
// (nt) or w[l][j].
func gemmRef(a, w []float32, m, n, k int, nt bool) (ref, mag []float64) {
	ref, mag = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s, g float64
			for l := range k {
				wv := w[l*n+j]
				if nt {
					wv = w[j*k+l]
				}
				p := float64(a[i*k+l]) * float64(wv)
				s += p
				g += math.Abs(p)
			}
			ref[i*n+j], mag[i*n+j] = s, g
		}
	}
	return ref, mag
}

// testGEMM: gemm_f32 over raw f32 weights and q8 weights (decoded in the
// kernel as codecs.DecodeRows decodes them), both layouts, shapes with
// partial tiles in every dimension. Each step of 32 products is one f32 sum
// by FMAs from zero (≤ 32·u of its Σ|a·W|) added to a Kahan total (≤ 2·u
// of the whole Σ|a·W| and second-order terms): |c − ref| ≤ 36·u·Σ|a·W|.
func testGEMM(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(43, 44))
	shapes := [][3]int{{1, 1, 1}, {5, 37, 33}, {33, 65, 70}, {40, 8, 300}}
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, nt := range []bool{true, false} {
			for _, f := range []codecs.Format{codecs.Raw, codecs.Q8} {
				rows, cols := n, k // the weight as stored
				if !nt {
					rows, cols = k, n
				}
				t.Run(fmt.Sprintf("%dx%dx%d/nt=%v/%s", m, n, k, nt, f), func(t *testing.T) {
					a := randF32(rng, m*k, 1)
					src := randF32(rng, rows*cols, 1)
					w, planes, res := residentWeight(t, e, f, rows, cols, src)
					c := zeros[float32](t, e, m*n+1)
					flag := uint32(0)
					if nt {
						flag = 1
					}
					run(t, e, "gemm.metal", "gemm_f32", grid((n+31)/32, (m+31)/32, 1), grid(128, 1, 1),
						buf(memOf(t, e, a)), planes[0], planes[1], planes[2], buf(c), u32(uint32(m)), u32(uint32(n)), u32(uint32(k)),
						u32(res.Code), u32(res.Bits), u32(uint32(res.MatRows)), u32(flag))
					got := valuesOf[float32](c)
					ref, mag := gemmRef(a, w, m, n, k, nt)
					for i := range ref {
						if d := math.Abs(float64(got[i]) - ref[i]); d > 36*roundoff*mag[i] {
							t.Fatalf("c[%d][%d] = %g, want %g (|Δ| %.3g > %.3g)", i/n, i%n, got[i], ref[i], d, 36*roundoff*mag[i])
						}
					}
					if got[m*n] != 0 {
						t.Errorf("wrote past c: %g", got[m*n])
					}
				})
			}
		}
	}
}

// residentWeight makes src ([rows][cols]) a resident weight of format f on
// e: its decoded values (what the kernels must see), the arguments of its
// planes and its layout. Raw weights are f32; q8 weights are encoded, then
// re-laid by relayout.kern.
func residentWeight(t *testing.T, e Engine, f codecs.Format, rows, cols int, src []float32) ([]float32, [3]Arg, kernels.Resident) {
	t.Helper()
	g := codecs.Matrix{Rows: int64(rows), K: int64(cols)}
	dt := codecs.F32
	raw := f32Bytes(src)
	if f != codecs.Raw {
		dt = codecs.BF16
		bf := make([]byte, 2*len(src))
		for i, v := range src {
			u := math.Float32bits(v) >> 16
			bf[2*i], bf[2*i+1] = byte(u), byte(u>>8)
		}
		raw = bf
	}
	res, err := kernels.ResidentLayout(f, dt, g)
	if err != nil {
		t.Fatal(err)
	}
	pack := raw
	if f != codecs.Raw {
		if pack, _, err = codecs.EncodeTensor(f, dt, g, codecs.Search, raw); err != nil {
			t.Fatal(err)
		}
	}
	dec := make([]float32, rows*cols)
	if err := codecs.DecodeRows(f, dt, g, pack, 0, g.Rows, dec); err != nil {
		t.Fatal(err)
	}
	m, err := e.Alloc(int(res.Size))
	if err != nil {
		t.Fatal(err)
	}
	if f == codecs.Raw {
		copy(m.Bytes(), pack)
	} else {
		run(t, e, "relayout.kern", "relayout_q8", grid(4, 1, 1), grid(64, 1, 1), buf(memOf(t, e, pack)),
			Arg{Mem: m, Off: int(res.Off[0])}, Arg{Mem: m, Off: int(res.Off[1])}, u32(uint32(rows)), u32(uint32(cols)))
	}
	var planes [3]Arg
	for i := range 3 {
		planes[i] = Arg{Mem: m, Off: int(res.Off[i])}
	}
	return dec, planes, res
}

// testCopyFill: copy_u32 moves every bit pattern (NaN payloads,
// subnormals) and nothing past n; fill_u32 writes its word.
func testCopyFill(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(45, 46))
	const n = 1000
	src := make([]uint32, n)
	for i := range src {
		src[i] = rng.Uint32()
	}
	dst := zeros[uint32](t, e, n+1)
	run(t, e, "copy.metal", "copy_u32", grid(3, 1, 1), grid(64, 1, 1), buf(dst), buf(memOf(t, e, src)), u64(n))
	got := valuesOf[uint32](dst)
	if !slices.Equal(got[:n], src) || got[n] != 0 {
		t.Errorf("copy_u32: %d words differ, tail %#x", n-countEqual(got[:n], src), got[n])
	}
	run(t, e, "copy.metal", "fill_u32", grid(2, 1, 1), grid(32, 1, 1), buf(dst), u32(0x7fc01234), u64(n-1))
	got = valuesOf[uint32](dst)
	for i, v := range got[:n-1] {
		if v != 0x7fc01234 {
			t.Fatalf("fill_u32: [%d] = %#x", i, v)
		}
	}
	if got[n-1] != src[n-1] {
		t.Errorf("fill_u32 wrote past n")
	}
}

// countEqual counts the equal elements of a and b.
func countEqual(a, b []uint32) int {
	n := 0
	for i := range a {
		if a[i] == b[i] {
			n++
		}
	}
	return n
}

// geluRef is PyTorch's tanh GELU in float64.
func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// testMoEExpertSG: moe_expert_sg_f32 over a tile table of 32-pair tiles
// (experts with 0, 1, 33 and 40 pairs: empty, partial and split tiles;
// every slot once),
// gate/up then down, raw f32 weights, against float64. Each sum is
// gemm_f32's (|δ| ≤ 36·u·Σ|terms|): down outputs are within that times the
// slot weight plus a rounding; gate/up's gelu(g)·u within
// (1.13·|u|·δg + |gelu(g)|·δu) + 8·u·|gelu(g)·u| (gelu's slope is at most
// 1.13; the f32 gelu and product add a few roundings).
func testMoEExpertSG(t *testing.T, e Engine) {
	rng := rand.New(rand.NewPCG(47, 48))
	const E, topk, H, F = 4, 2, 70, 40
	counts := []int{0, 1, 33, 40}
	P := 0
	for _, c := range counts {
		P += c
	}
	// Every slot t·topk + j once, dealt to the experts at random, each
	// expert's slots ascending (as moe_scatter_u32 lists them).
	perm := rng.Perm(P)
	var pairs []uint32
	var tiles []uint32
	for ex, c := range counts {
		mine := slices.Clone(perm[len(pairs) : len(pairs)+c])
		slices.Sort(mine)
		for p := 0; p < c; p += 32 {
			tiles = append(tiles, uint32(ex), uint32(len(pairs)+p), uint32(min(32, c-p)))
		}
		for _, sl := range mine {
			pairs = append(pairs, uint32(sl))
		}
	}
	tiles = append([]uint32{uint32(len(tiles) / 3)}, tiles...)
	slots := P
	tokens := (P + topk - 1) / topk
	u := randF32(rng, tokens*H, 1)
	gateUp := randF32(rng, E*2*F*H, 1/math.Sqrt(H))
	down := randF32(rng, E*H*F, 1/math.Sqrt(F))
	wts := make([]float32, slots)
	for i := range wts {
		wts[i] = float32(0.2 + rng.Float64())
	}
	exOf := make([]int, P)
	for ex, at := 0, 0; ex < E; ex++ {
		for range counts[ex] {
			exOf[at] = ex
			at++
		}
	}
	pm, tm, wm := memOf(t, e, pairs), memOf(t, e, tiles), memOf(t, e, wts)
	z := zeros[float32](t, e, P*F)
	y := zeros[float32](t, e, slots*H)
	gm, dm := memOf(t, e, gateUp), memOf(t, e, down)
	launch := func(w Mem, a, out Mem, kd, nout int, gateup uint32) {
		run(t, e, "moe.metal", "moe_expert_sg_f32", grid((nout+31)/32, len(tiles)/3+1, 1), grid(128, 1, 1),
			buf(w), buf(w), buf(w), buf(a), buf(pm), buf(tm), buf(wm), buf(out), u32(0), u32(0),
			u32(uint32(kd)), u32(uint32(nout)), u32(topk), u32(gateup), u32(1))
	}
	launch(gm, memOf(t, e, u), z, H, F, 1)
	launch(dm, z, y, F, H, 0)
	gz, gy := valuesOf[float32](z), valuesOf[float32](y)
	dot := func(a, w []float32) (s, mag float64) {
		for l := range a {
			p := float64(a[l]) * float64(w[l])
			s, mag = s+p, mag+math.Abs(p)
		}
		return s, mag
	}
	for p := range P {
		tok, ex := int(pairs[p])/topk, exOf[p]
		a := u[tok*H : (tok+1)*H]
		for n := range F {
			g, mg := dot(a, gateUp[(ex*2*F+n)*H:(ex*2*F+n+1)*H])
			up, mu := dot(a, gateUp[(ex*2*F+F+n)*H:(ex*2*F+F+n+1)*H])
			ref := geluRef(g) * up
			bound := 1.13*math.Abs(up)*36*roundoff*mg + math.Abs(geluRef(g))*36*roundoff*mu + 8*roundoff*math.Abs(ref)
			if d := math.Abs(float64(gz[p*F+n]) - ref); d > bound {
				t.Fatalf("z[%d][%d] = %g, want %g (|Δ| %.3g > %.3g)", p, n, gz[p*F+n], ref, d, bound)
			}
		}
		slot := pairs[p]
		for n := range H {
			s, mag := dot(gz[p*F:(p+1)*F], down[(ex*H+n)*F:(ex*H+n+1)*F])
			ref := s * float64(wts[slot])
			bound := (36*roundoff*mag + roundoff*math.Abs(s)) * float64(wts[slot])
			if d := math.Abs(float64(gy[int(slot)*H+n]) - ref); d > bound {
				t.Fatalf("y[%d][%d] = %g, want %g (|Δ| %.3g > %.3g)", slot, n, gy[int(slot)*H+n], ref, d, bound)
			}
		}
	}
}
