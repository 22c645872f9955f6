package dev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/cuda"
)

// The q4 GEMM's alternate against the production kernel: the same inputs
// through q4_gemm (s, m, l) and q4_gemm_v2 (s2, m2, l2) of equal bm, the
// outputs compared bit for bit and the mean time of each logged. Skipped
// without a GPU.

// harness is a device, the compiled harness unit and the test's buffers.
type harness struct {
	t   *testing.T
	d   *cuda.Device
	m   *cuda.Module
	ops *cuda.Ops
	rng *rand.Rand
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrUnavailable) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.SetCacheDir("")
	src, err := Q4Source()
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Compile("q4_gemm_v2.cu", src)
	if err != nil {
		t.Fatal(err)
	}
	ops := cuda.NewOps(d)
	t.Cleanup(func() { m.Close(); ops.Close() })
	return &harness{t: t, d: d, m: m, ops: ops, rng: rand.New(rand.NewPCG(5, 6))}
}

// buf allocates n bytes, freed at the end of the test, and uploads src when
// not nil.
func (h *harness) buf(n int64, src []byte) *cuda.Buffer {
	h.t.Helper()
	b, err := h.d.Alloc(max(n, 16))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { b.Free() })
	if src != nil {
		if err := b.Upload(src); err != nil {
			h.t.Fatal(err)
		}
	}
	return b
}

// q4Weight makes a resident q4 weight of rows × k with random codes,
// deltas in [0.01, 0.03) and mins −8·delta, and returns its planes.
func (h *harness) q4Weight(rows, k int) [3]cuda.Ptr {
	h.t.Helper()
	m := codecs.Matrix{Rows: int64(rows), K: int64(k)}
	pack := make([]byte, rows*k/32*20) // q4_block: [delta bf16][min bf16][16 code bytes]
	for b := 0; b < rows*k/32; b++ {
		delta := float32(0.01 + 0.02*h.rng.Float64())
		binary.LittleEndian.PutUint16(pack[20*b:], uint16(math.Float32bits(delta)>>16))
		binary.LittleEndian.PutUint16(pack[20*b+2:], uint16(math.Float32bits(-8*delta)>>16))
		for i := 4; i < 20; i++ {
			pack[20*b+i] = byte(h.rng.Uint32())
		}
	}
	w, err := h.ops.UploadTensor(codecs.Q4, codecs.BF16, m, pack)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { w.Free() })
	off, err := cuda.PlaneOffsets(codecs.Q4, codecs.BF16, m)
	if err != nil {
		h.t.Fatal(err)
	}
	return [3]cuda.Ptr{w.Ptr().Add(off[0]), w.Ptr().Add(off[1]), w.Ptr().Add(off[2])}
}

// pack packs rows × kd f32 at src to fp16 (moe_pack_f16) and returns the
// packed rows and their scalings.
func (h *harness) pack(src cuda.Ptr, rows, kd int) (a, inv cuda.Ptr) {
	h.t.Helper()
	ab, ib := h.buf(2*int64(rows)*int64(kd), nil), h.buf(4*int64(rows), nil)
	if err := h.m.Launch("moe_pack_f16", [3]uint32{uint32((rows*32 + 255) / 256), 1, 1}, [3]uint32{256, 1, 1}, 0,
		src, uint32(rows), uint32(kd), ab.Ptr(), ib.Ptr()); err != nil {
		h.t.Fatal(err)
	}
	return ab.Ptr(), ib.Ptr()
}

// randF32 uploads n random normal f32 values.
func (h *harness) randF32(n int) *cuda.Buffer {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(h.rng.NormFloat64())
	}
	return h.buf(4*int64(n), cuda.Bytes(v))
}

// gemm is one launch of a q4 GEMM kernel: everything but the instance.
type gemm struct {
	prefix   string // "q4_dense_", "moe_q4_gateup_", "moe_q4_down_"
	w        [3]cuda.Ptr
	a, ainv  cuda.Ptr
	pairs    cuda.Ptr
	tiles    cuda.Ptr
	wts      cuda.Ptr
	out      *cuda.Buffer
	kd, nout int
	m, topk  int
	wrows    int
	gridY    func(k Q4Instance) uint32 // blocks in y for instance k
}

// run launches g with instance k once (output zeroed first), downloads the
// output, then returns the mean time of reps launches back to back.
func (h *harness) run(g gemm, k Q4Instance, reps int) ([]byte, time.Duration) {
	h.t.Helper()
	cols := 128
	if g.prefix == "moe_q4_gateup_" {
		cols = 64
	}
	grid := [3]uint32{uint32((g.nout + cols - 1) / cols), g.gridY(k), 1}
	launch := func() error {
		return h.m.Launch(g.prefix+k.Name, grid, [3]uint32{k.Threads(), 1, 1}, k.Smem(g.kd, cols == 64),
			g.w[0], g.w[1], g.w[2], g.a, g.ainv, g.pairs, g.tiles, g.wts, g.out.Ptr(),
			uint32(g.kd), uint32(g.nout), uint32(g.m), uint32(g.topk), uint32(g.wrows))
	}
	if err := g.out.Zero(); err != nil {
		h.t.Fatal(err)
	}
	if err := launch(); err != nil {
		h.t.Fatalf("%s%s: %v", g.prefix, k.Name, err)
	}
	got := make([]byte, g.out.Size())
	if err := g.out.Download(got); err != nil {
		h.t.Fatal(err)
	}
	start := time.Now()
	for range reps {
		if err := launch(); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := h.d.Sync(); err != nil {
		h.t.Fatal(err)
	}
	return got, time.Since(start) / time.Duration(reps)
}

// compare runs g with every production instance and its alternate
// (compareOne).
func (h *harness) compare(name string, g gemm) {
	h.t.Helper()
	for i := range Production {
		h.compareOne(name, g, i)
	}
}

// TestQ4V2Dense compares q4_dense of both generations at dense shapes.
func TestQ4V2Dense(t *testing.T) {
	h := newHarness(t)
	for _, sh := range [][3]int{{256, 2816, 2816}, {37, 704, 2816}, {256, 2816, 704}} {
		m, n, k := sh[0], sh[1], sh[2]
		w := h.q4Weight(n, k)
		a, ainv := h.pack(h.randF32(m*k).Ptr(), m, k)
		out := h.buf(4*int64(m)*int64(n), nil)
		h.compare(fmt.Sprintf("dense %dx%dx%d", m, n, k), gemm{prefix: "q4_dense_", w: w, a: a, ainv: ainv,
			pairs: a, tiles: a, wts: a, out: out, kd: k, nout: n, m: m, topk: 1, wrows: n,
			gridY: func(q Q4Instance) uint32 { return uint32((m + q.BM() - 1) / q.BM()) }})
	}
}

// routing is a random top-K routing of tokens over E experts: the pairs
// (slots t·K + j) grouped by expert in ascending slot order, and per bm the
// tile table (router.kern's layout).
type routing struct {
	pairs  []uint32
	counts []int
}

func newRouting(rng *rand.Rand, tokens, E, K int) routing {
	idx := make([]int, tokens*K)
	for t := range tokens {
		for j, e := range rng.Perm(E)[:K] {
			idx[t*K+j] = e
		}
	}
	r := routing{counts: make([]int, E)}
	for e := range E {
		for s, x := range idx {
			if x == e {
				r.pairs = append(r.pairs, uint32(s))
				r.counts[e]++
			}
		}
	}
	return r
}

// tiles is the tile table of bm pairs a tile: [T, (expert, first, count)…].
func (r routing) tiles(bm int) []uint32 {
	out := []uint32{0}
	first := 0
	for e, c := range r.counts {
		for j := 0; j < c; j += bm {
			out = append(out, uint32(e), uint32(first+j), uint32(min(bm, c-j)))
		}
		first += c
	}
	out[0] = uint32((len(out) - 1) / 3)
	return out
}

// TestQ4V2Grouped compares the grouped gate/up and down GEMMs of both
// generations at the model's MoE shape (E 128, K 8, H 2816, F 704) with a
// random routing of 256 and 1024 tokens.
func TestQ4V2Grouped(t *testing.T) {
	h := newHarness(t)
	const E, K, H, F = 128, 8, 2816, 704
	gu, dn := h.q4Weight(E*2*F, H), h.q4Weight(E*H, F)
	for _, tokens := range []int{256, 1024} {
		r := newRouting(h.rng, tokens, E, K)
		P := tokens * K
		tables := map[int]cuda.Ptr{}
		counts := map[int]uint32{}
		for _, k := range Production {
			tb := r.tiles(k.BM())
			tables[k.BM()] = h.buf(4*int64(len(tb)), cuda.Bytes(tb)).Ptr()
			counts[k.BM()] = tb[0]
		}
		gridY := func(q Q4Instance) uint32 { return counts[q.BM()] }
		pairs := h.buf(4*int64(P), cuda.Bytes(r.pairs)).Ptr()
		wts := h.randF32(P).Ptr()
		a, ainv := h.pack(h.randF32(tokens*H).Ptr(), tokens, H)
		z := h.buf(4*int64(P)*F, nil)
		zb, zinv := h.pack(h.randF32(P*F).Ptr(), P, F)
		y := h.buf(4*int64(P)*H, nil)
		for _, g := range []gemm{
			{prefix: "moe_q4_gateup_", w: gu, a: a, ainv: ainv, out: z, kd: H, nout: F, topk: K, wrows: E * 2 * F},
			{prefix: "moe_q4_down_", w: dn, a: zb, ainv: zinv, out: y, kd: F, nout: H, topk: K, wrows: E * H},
		} {
			g.pairs, g.wts, g.gridY = pairs, wts, gridY
			for i, k := range Production { // one table per bm
				g.tiles = tables[k.BM()]
				h.compareOne(fmt.Sprintf("%d tokens %s", tokens, g.prefix), g, i)
			}
		}
	}
}

// compareOne runs g with production instance i and its alternate, reports
// a difference in any output bit and logs both mean times.
func (h *harness) compareOne(name string, g gemm, i int) {
	h.t.Helper()
	prod, alt := Production[i], Alternates[i]
	want, tp := h.run(g, prod, 20)
	got, ta := h.run(g, alt, 20)
	if !bytes.Equal(got, want) {
		h.t.Errorf("%s: %s%s differs from %s%s", name, g.prefix, alt.Name, g.prefix, prod.Name)
	}
	h.t.Logf("%s, bm %3d: q4_gemm (%s) %.3f ms, q4_gemm_v2 (%s) %.3f ms", name, prod.BM(), prod.Name,
		float64(tp.Microseconds())/1e3, alt.Name, float64(ta.Microseconds())/1e3)
}
