package cuda

import (
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	api "github.com/dgq-dev/dgq/runtime/backend"
)

// MoE on the device: the router (router.kern and a cuBLAS SGEMM), grouping
// by expert with a tile table, grouped expert GEMMs (moe_expert_f32, exact;
// in PrecisionBF16 for q4 experts moe_mma.cu's fp16 tensor-core GEMM,
// moe_q4_gateup_*/moe_q4_down_*) and the combine, all queued on the stream
// with no host round trip. docs/cuda.md, "MoE", has the design.

// moeBM is the exact kernel's pairs per tile (MOE_BM in router.kern); the
// fast GEMM's tables have their configuration's bm.
const moeBM = 64

// moeMaxExperts bounds E (moe_topk_f32's shared arrays).
const moeMaxExperts = 1024

// Weight format codes of moe_decode (router.kern).
const (
	moeF32 uint32 = iota
	moeBF16
	moeF16
	moeQ8
	moeAffine
	moeNVFP4
)

// moeFormat describes a resident weight for moe_expert_f32: its format
// code, the bits of an affine format, its plane addresses (planar.go) and
// the rows of one of its matrices (nvfp4's matrix scales; 1 where unused).
func moeFormat(w *cudaWeight) (code, bits uint32, p [3]Ptr, matRows uint32, err error) {
	base := w.b.Ptr()
	p = [3]Ptr{base, base, base}
	if w.f32 {
		return moeF32, 0, p, 1, nil
	}
	pl, err := planarLayout(w.f, w.dt, w.geom)
	if err != nil {
		return 0, 0, p, 1, err
	}
	p = pl.ptrs(base, 0)
	switch w.f {
	case codecs.Raw:
		switch w.dt {
		case codecs.BF16:
			return moeBF16, 0, p, 1, nil
		case codecs.F16:
			return moeF16, 0, p, 1, nil
		case codecs.F32:
			return moeF32, 0, p, 1, nil
		}
	case codecs.Q8:
		return moeQ8, 0, p, 1, nil
	case codecs.Q4, codecs.Q5, codecs.Q6:
		return moeAffine, uint32(w.f.Bits()), p, 1, nil
	case codecs.NVFP4:
		return moeNVFP4, 0, p, uint32(pl.matRows), nil
	}
	return 0, 0, p, 1, fmt.Errorf("cuda: MoE: no decoder for %s %s", w.f, w.dt)
}

// q4Fast reports whether w runs the tensor-core q4 kernels.
func (c *backend) q4Fast(w *cudaWeight) bool {
	return c.fast && !w.f32 && w.f == codecs.Q4 && w.geom.K%32 == 0 && c.fastMMA()
}

func (c *backend) MoE(out, u, x api.Buf, rows int, w api.MoEWeights) error {
	return c.moe(out, u, x, rows, w, nil)
}

// moeScratch holds the device addresses of one MoE call's scratch.
type moeScratch struct {
	r, rw, logits, idx, wts, counts, pairs, tiles, z, y Ptr
	ftiles                                              Ptr // the fast GEMMs' tile table (bm of their configuration), where it differs from tiles
	ab, ainv, zb, zinv                                  Ptr // packed fp16 activations and their row scalings (fast q4)
}

// moe is MoE; when stage is not nil it is called after each stage's work is
// queued ("router", "group", "gateup", "down", "combine") and may wait for
// it (the timing test does).
func (c *backend) moe(out, u, x api.Buf, rows int, w api.MoEWeights, stage func(string) error) error {
	E, H, F, err := api.CheckMoE(out, u, x, rows, w)
	if err != nil {
		return err
	}
	var bufs [5]*cudaBuf
	for i, b := range []api.Buf{out, u, x, w.RouterScale, w.PerExpertScale} {
		if bufs[i], err = c.buf(b); err != nil {
			return err
		}
	}
	var ws [3]*cudaWeight
	for i, wt := range []api.Weight{w.Router, w.GateUp, w.Down} {
		if ws[i], err = c.weight(wt); err != nil {
			return err
		}
	}
	ob, ub, xb, rsb, pesb := bufs[0].b.Ptr(), bufs[1].b.Ptr(), bufs[2].b.Ptr(), bufs[3].b.Ptr(), bufs[4].b.Ptr()
	router, gateUp, down := ws[0], ws[1], ws[2]
	K := w.TopK
	P := int64(rows) * int64(K)
	maxTiles := (P + int64(E)*(moeBM-1)) / moeBM
	switch {
	case E > moeMaxExperts:
		return fmt.Errorf("cuda: MoE of %d experts (at most %d)", E, moeMaxExperts)
	case P >= 1<<24:
		return fmt.Errorf("cuda: MoE of %d token-expert pairs (fewer than 2^24)", P)
	case maxTiles > 65535:
		return fmt.Errorf("cuda: MoE of %d tiles (at most 65535)", maxTiles)
	case H >= 1<<24 || F >= 1<<24:
		return fmt.Errorf("cuda: MoE of width %d, expert width %d", H, F)
	}
	fastGU, fastDown := c.q4Fast(gateUp), c.q4Fast(down)
	// The q4 GEMMs: moe_tiled.cu where DGQ_MOE_KERNEL=tiled asks for it and
	// the width fits it, else moe_mma.cu's (q4GU, q4Down), whose
	// configuration is chosen by the mean pairs per expert; where none fits
	// the device, the exact kernel.
	tiledGU := fastGU && moeTiledOn() && tiledFits(H)
	tiledDown := fastDown && moeTiledOn() && tiledFits(F)
	q4GU, q4Down := fastGU && !tiledGU, fastDown && !tiledDown
	var cfg moeQ4Config
	fTiles := maxTiles
	if q4GU || q4Down {
		var kds []int
		if q4GU {
			kds = append(kds, H)
		}
		if q4Down {
			kds = append(kds, F)
		}
		// A table of bm pairs a tile has at most (P + E·(bm−1))/bm tiles.
		ok := false
		if cfg, ok = c.q4Pick(float64(P)/float64(E), P+int64(E)*128, q4GU, kds...); !ok {
			q4GU, q4Down = false, false
		} else {
			fTiles = (P + int64(E)*int64(cfg.bm()-1)) / int64(cfg.bm())
		}
	}
	// One tile table serves every GEMM when both are moe_mma.cu's; else the
	// others' (bm 64) and, for moe_mma.cu's, one of its bm.
	scatterBM := int64(moeBM)
	if q4GU && q4Down {
		scatterBM = int64(cfg.bm())
	}
	needFTiles := (q4GU || q4Down) && scatterBM != int64(cfg.bm())
	if stage == nil {
		stage = func(string) error { return nil }
	}

	// Scratch.
	st := c.moeState()
	var s moeScratch
	rows64, E64, H64, F64 := int64(rows), int64(E), int64(H), int64(F)
	for _, a := range []struct {
		p    *Ptr
		name string
		n    int64
		need bool
	}{
		{&s.r, "moe.r", 4 * rows64 * H64, true},
		{&s.rw, "moe.rw", 4 * E64 * H64, !router.f32},
		{&s.logits, "moe.logits", 4 * rows64 * E64, true},
		{&s.idx, "moe.idx", 4 * P, true},
		{&s.wts, "moe.wts", 4 * P, true},
		{&s.counts, "moe.counts", 4 * E64, true},
		{&s.pairs, "moe.pairs", 4 * P, true},
		{&s.tiles, "moe.tiles", 4 * (1 + 3*max(maxTiles, fTiles)), true},
		{&s.ftiles, "moe.ftiles", 4 * (1 + 3*fTiles), needFTiles},
		{&s.z, "moe.z", 4 * P * F64, true},
		{&s.y, "moe.y", 4 * P * H64, true},
		{&s.ab, "moe.ab", 2 * rows64 * H64, q4GU},
		{&s.ab, "moe.ab", 2 * P * H64, tiledGU},
		{&s.ainv, "moe.ainv", 4 * rows64, q4GU},
		{&s.zb, "moe.zb", 2 * P * F64, q4Down || tiledDown},
		{&s.zinv, "moe.zinv", 4 * P, q4Down},
	} {
		if !a.need {
			continue
		}
		if *a.p, err = st.scratch(c.d, a.name, a.n); err != nil {
			return err
		}
	}
	rk, err := c.ops.module("router.kern")
	if err != nil {
		return err
	}
	var mm *Module
	if q4GU || q4Down {
		if mm, err = st.module(c.d); err != nil {
			return err
		}
	}
	grid1 := func(n int) [3]uint32 { return [3]uint32{uint32(n), 1, 1} }
	block1 := func(n int) [3]uint32 { return [3]uint32{uint32(n), 1, 1} }

	// Router: r = ((RMSNorm(x)·scale)·root), logits = r·Routerᵀ (f32 SGEMM),
	// softmax and top-K.
	if err := rk.Launch("moe_router_norm_f32", grid1(rows), block1(normThreads), 0,
		xb, rsb, s.r, uint32(H), w.Eps, w.RouterRoot); err != nil {
		return err
	}
	rwp := router.b.Ptr()
	if !router.f32 {
		if err := c.dequant(s.rw, router); err != nil {
			return err
		}
		rwp = s.rw
	}
	if err := c.d.MatMulNT(s.logits, s.r, rwp, rows, E, H); err != nil {
		return err
	}
	topkThreads := min(moeMaxExperts, max(32, (E+31)/32*32))
	if err := rk.Launch("moe_topk_f32", grid1(rows), block1(topkThreads), 0,
		s.logits, pesb, s.idx, s.wts, uint32(E), uint32(K)); err != nil {
		return err
	}
	if err := stage("router"); err != nil {
		return err
	}

	// Grouping: counts, pair list by expert, tile table(s).
	const groupThreads = 256
	if err := rk.Launch("moe_count_u32", grid1(E), block1(groupThreads), 0, s.idx, s.counts, uint32(P)); err != nil {
		return err
	}
	if err := rk.Launch("moe_scatter_u32", grid1(E), block1(groupThreads), 0,
		s.idx, s.counts, s.pairs, s.tiles, uint32(P), uint32(E), uint32(scatterBM)); err != nil {
		return err
	}
	ftiles := s.tiles
	if needFTiles {
		if err := mm.Launch("moe_tiles_u32", grid1(1), block1(1024), 0, s.counts, s.ftiles, uint32(E), uint32(cfg.bm())); err != nil {
			return err
		}
		ftiles = s.ftiles
	}
	if err := stage("group"); err != nil {
		return err
	}

	// Gate/up with gelu·up: z [P][F].
	var tm *Module
	if tiledGU || tiledDown {
		if tm, err = c.tiledModule(); err != nil {
			return err
		}
	}
	if tiledGU {
		if err := c.moeGather(tm, ub, s.pairs, uint32(K), P, H, s.ab); err != nil {
			return err
		}
		if err := c.tiledLaunch(tm, true, gateUp, s.ab, s.pairs, s.tiles, s.wts, s.z, H, F, maxTiles); err != nil {
			return err
		}
	} else if q4GU {
		if err := c.moePack(mm, ub, rows64, H, s.ab, s.ainv); err != nil {
			return err
		}
		if err := c.q4Launch(mm, cfg, "moe_q4_gateup_", gateUp, s.ab, s.ainv, s.pairs, ftiles, s.wts, s.z,
			H, F, 0, K, [3]uint32{uint32((F + 63) / 64), uint32(fTiles), 1}); err != nil {
			return err
		}
	} else {
		if err := c.moeExact(rk, gateUp, ub, s.pairs, s.tiles, s.wts, s.z, H, F, K, true,
			[3]uint32{uint32((F + 31) / 32), uint32(maxTiles), 1}); err != nil {
			return err
		}
	}
	if err := stage("gateup"); err != nil {
		return err
	}

	// Down, times the slot weight: y [P slots][H].
	if tiledDown {
		if err := c.moeGather(tm, s.z, s.pairs, 0, P, F, s.zb); err != nil {
			return err
		}
		if err := c.tiledLaunch(tm, false, down, s.zb, s.pairs, s.tiles, s.wts, s.y, F, H, maxTiles); err != nil {
			return err
		}
	} else if q4Down {
		if err := c.moePack(mm, s.z, P, F, s.zb, s.zinv); err != nil {
			return err
		}
		if err := c.q4Launch(mm, cfg, "moe_q4_down_", down, s.zb, s.zinv, s.pairs, ftiles, s.wts, s.y,
			F, H, 0, K, [3]uint32{uint32((H + 127) / 128), uint32(fTiles), 1}); err != nil {
			return err
		}
	} else {
		if err := c.moeExact(rk, down, s.z, s.pairs, s.tiles, s.wts, s.y, F, H, K, false,
			[3]uint32{uint32((H + 63) / 64), uint32(maxTiles), 1}); err != nil {
			return err
		}
	}
	if err := stage("down"); err != nil {
		return err
	}

	// out[t] = Σ_j y[t·K + j] in slot order (four columns a thread in fast
	// mode: the same sums).
	const block = 256
	if c.fast && mm != nil && H%4 == 0 { // mm: sm_80 or later
		if err := mm.Launch("moe_combine4_f32", [3]uint32{c.ops.gridFor(rows64*H64/4, block), 1, 1}, block1(block), 0,
			s.y, ob, uint32(rows), uint32(H), uint32(K)); err != nil {
			return err
		}
	} else if err := rk.Launch("moe_combine_f32", [3]uint32{c.ops.gridFor(rows64*H64, block), 1, 1}, block1(block), 0,
		s.y, ob, uint32(rows), uint32(H), uint32(K)); err != nil {
		return err
	}
	return stage("combine")
}

// moeExact queues moe_expert_f32 for weight wt (gate/up when gateup, else
// down) reading activations a with reduction width kd into out.
func (c *backend) moeExact(rk *Module, wt *cudaWeight, a, pairs, tiles, wts, out Ptr, kd, nout, topk int, gateup bool, grid [3]uint32) error {
	code, bits, p, matRows, err := moeFormat(wt)
	if err != nil {
		return err
	}
	gu := uint32(0)
	if gateup {
		gu = 1
	}
	return rk.Launch("moe_expert_f32", grid, [3]uint32{256, 1, 1}, 0,
		p[0], p[1], p[2], a, pairs, tiles, wts, out, code, bits, uint32(kd), uint32(nout), uint32(topk), gu, matRows)
}

// moePack queues moe_pack_f16: rows × kd f32 from src to fp16 rows at dst
// (the permuted run order of moe_mma.cu), each scaled by a power of two
// whose inverse goes to inv[row]. One warp per row.
func (c *backend) moePack(mm *Module, src Ptr, rows int64, kd int, dst, inv Ptr) error {
	const block = 256
	return mm.Launch("moe_pack_f16", [3]uint32{c.ops.gridFor(rows*32, block), 1, 1}, [3]uint32{block, 1, 1}, 0,
		src, uint32(rows), uint32(kd), dst, inv)
}

// q4Launch queues the q4 tensor-core GEMM kernel prefix+cfg.name on weight
// wt (q4, kd columns): a/ainv the packed activations and their row
// scalings, out the result, nout its width; m the rows of q4_dense (0 for
// the grouped kernels), topk the pairs per token (gate/up reads token
// pair/topk).
func (c *backend) q4Launch(mm *Module, cfg moeQ4Config, prefix string, wt *cudaWeight, a, ainv, pairs, tiles, wts, out Ptr, kd, nout, m, topk int, grid [3]uint32) error {
	if wt.f != codecs.Q4 || wt.f32 {
		return fmt.Errorf("cuda: q4 GEMM of a %s weight", wt.f)
	}
	pl, err := planarLayout(codecs.Q4, wt.dt, wt.geom)
	if err != nil {
		return err
	}
	p := pl.ptrs(wt.b.Ptr(), 0)
	return mm.Launch(prefix+cfg.name, grid, [3]uint32{cfg.threads(), 1, 1}, cfg.smem(kd, prefix == "moe_q4_gateup_"),
		p[0], p[1], p[2], a, ainv, pairs, tiles, wts, out, uint32(kd), uint32(nout), uint32(m), uint32(topk), uint32(wt.geom.Rows))
}
