package cuda

import (
	"fmt"

	api "github.com/dgq-dev/dgq/runtime/backend"
)

// MoE on the device, four stages queued on the stream with no host round
// trip (docs/cuda.md, "MoE"):
//
//   - routing (moeRoute): router.kern's norm, the router logits by a cuBLAS
//     SGEMM, softmax and top-K;
//   - grouping (moeGroup): the token-expert pairs grouped by expert, and the
//     tile table the GEMMs walk;
//   - expert GEMMs (moeGateUp, moeDown): router.kern's exact moe_expert_f32,
//     or in bf16 precision for q4 experts moe_mma.cu's tensor-core q4 GEMM;
//   - combine (moeCombine): each token's slots summed in slot order.

// moeBM is the exact kernel's pairs per tile (MOE_BM in router.kern); the
// q4 GEMM's tables have its configuration's bm.
const moeBM = 64

// moeMaxExperts bounds E (moe_topk_f32's shared arrays).
const moeMaxExperts = 1024

// groupThreads is the group size of the grouping kernels and of the
// 1-D kernels of the MoE.
const groupThreads = 256

// moeCall is one MoE call: its operands, shape, kernels and scratch.
type moeCall struct {
	out, u, x, rscale, pes Ptr
	router, gateUp, down   *cudaWeight
	eps, root              float32
	rows, E, H, F, K       int
	P                      int64 // token-expert pairs, rows·K
	tiles                  int64 // bound on the exact kernel's tiles (bm 64)

	// The q4 GEMM (bf16 precision, q4 experts): which of the two it runs,
	// its configuration and its tile bound (its bm).
	q4GU, q4Down bool
	cfg          q4Config
	fTiles       int64

	s moeScratch
}

// moeScratch holds the device addresses of one MoE call's scratch (the
// arena's "moe.*" buffers).
type moeScratch struct {
	r, rw, logits, idx, wts, counts, pairs, tiles, z, y Ptr
	ftiles                                              Ptr // the q4 GEMMs' tile table, where its bm differs from 64
	ab, ainv, zb, zinv                                  Ptr // packed fp16 activations and their row scalings (q4 GEMM)
}

// q4Table reports whether the q4 GEMMs walk a table of their own bm (one
// GEMM is the exact kernel's, or the configuration's bm is not 64): then
// moe_tiles_u32 builds it beside the exact kernel's.
func (m *moeCall) q4Table() bool {
	return (m.q4GU || m.q4Down) && m.scatterBM() != m.cfg.bm()
}

// scatterBM is the bm of the table moe_scatter_u32 builds: the q4 GEMM's
// when both GEMMs are its, else the exact kernel's.
func (m *moeCall) scatterBM() int {
	if m.q4GU && m.q4Down {
		return m.cfg.bm()
	}
	return moeBM
}

// q4Tiles is the table the q4 GEMMs walk.
func (m *moeCall) q4Tiles() Ptr {
	if m.q4Table() {
		return m.s.ftiles
	}
	return m.s.tiles
}

func (c *backend) MoE(out, u, x api.Buf, rows int, w api.MoEWeights) error {
	return c.moe(out, u, x, rows, w, nil)
}

// moe is MoE; when stage is not nil it is called after each stage's work is
// queued ("router", "group", "gateup", "down", "combine") and may wait for
// it (the timing test does).
func (c *backend) moe(out, u, x api.Buf, rows int, w api.MoEWeights, stage func(string) error) error {
	m, err := c.moePlan(out, u, x, rows, w)
	if err != nil {
		return err
	}
	for _, st := range []struct {
		name string
		run  func(*moeCall) error
	}{
		{"router", c.moeRoute}, {"group", c.moeGroup}, {"gateup", c.moeGateUp}, {"down", c.moeDown}, {"combine", c.moeCombine},
	} {
		if err := st.run(m); err != nil {
			return err
		}
		if stage == nil {
			continue
		}
		if err := stage(st.name); err != nil {
			return err
		}
	}
	return nil
}

// moePlan checks a call, resolves its operands, chooses its GEMMs and
// allocates its scratch.
func (c *backend) moePlan(out, u, x api.Buf, rows int, w api.MoEWeights) (*moeCall, error) {
	E, H, F, err := api.CheckMoE(out, u, x, rows, w)
	if err != nil {
		return nil, err
	}
	m := &moeCall{eps: w.Eps, root: w.RouterRoot, rows: rows, E: E, H: H, F: F, K: w.TopK}
	if err := c.moeOperands(m, out, u, x, w); err != nil {
		return nil, err
	}
	m.P = int64(rows) * int64(m.K)
	m.tiles = (m.P + int64(E)*(moeBM-1)) / moeBM
	switch {
	case E > moeMaxExperts:
		return nil, fmt.Errorf("cuda: MoE of %d experts (at most %d)", E, moeMaxExperts)
	case m.P >= 1<<24:
		return nil, fmt.Errorf("cuda: MoE of %d token-expert pairs (fewer than 2^24)", m.P)
	case m.tiles > 65535:
		return nil, fmt.Errorf("cuda: MoE of %d tiles (at most 65535)", m.tiles)
	case H >= 1<<24 || F >= 1<<24:
		return nil, fmt.Errorf("cuda: MoE of width %d, expert width %d", H, F)
	}
	c.moeChooseGEMMs(m)
	return m, c.moeAlloc(m)
}

// moeOperands resolves the buffers and weights of a call.
func (c *backend) moeOperands(m *moeCall, out, u, x api.Buf, w api.MoEWeights) error {
	p, err := c.ptrs(out, u, x, w.RouterScale, w.PerExpertScale)
	if err != nil {
		return err
	}
	m.out, m.u, m.x, m.rscale, m.pes = p[0], p[1], p[2], p[3], p[4]
	for _, a := range []struct {
		dst **cudaWeight
		w   api.Weight
	}{{&m.router, w.Router}, {&m.gateUp, w.GateUp}, {&m.down, w.Down}} {
		if *a.dst, err = c.weight(a.w); err != nil {
			return err
		}
	}
	return nil
}

// moeChooseGEMMs takes the q4 GEMM for the q4 experts of a bf16 backend,
// with the configuration for the mean pairs per expert, where one fits.
func (c *backend) moeChooseGEMMs(m *moeCall) {
	m.q4GU, m.q4Down = c.q4Fast(m.gateUp), c.q4Fast(m.down)
	m.fTiles = m.tiles
	if !m.q4GU && !m.q4Down {
		return
	}
	// A table of bm pairs a tile has at most (P + E·(bm−1))/bm tiles.
	cfg, ok := c.q4Pick(float64(m.P)/float64(m.E), m.P+int64(m.E)*128)
	if !ok {
		m.q4GU, m.q4Down = false, false
		return
	}
	m.cfg = cfg
	m.fTiles = (m.P + int64(m.E)*int64(cfg.bm()-1)) / int64(cfg.bm())
}

// moeAlloc takes the call's scratch from the arena.
func (c *backend) moeAlloc(m *moeCall) error {
	s := &m.s
	rows, E, H, F := int64(m.rows), int64(m.E), int64(m.H), int64(m.F)
	for _, a := range []struct {
		p    *Ptr
		name string
		n    int64
		need bool
	}{
		{&s.r, "moe.r", 4 * rows * H, true},
		{&s.rw, "moe.rw", 4 * E * H, !m.router.f32},
		{&s.logits, "moe.logits", 4 * rows * E, true},
		{&s.idx, "moe.idx", 4 * m.P, true},
		{&s.wts, "moe.wts", 4 * m.P, true},
		{&s.counts, "moe.counts", 4 * E, true},
		{&s.pairs, "moe.pairs", 4 * m.P, true},
		{&s.tiles, "moe.tiles", 4 * (1 + 3*max(m.tiles, m.fTiles)), true},
		{&s.ftiles, "moe.ftiles", 4 * (1 + 3*m.fTiles), m.q4Table()},
		{&s.z, "moe.z", 4 * m.P * F, true},
		{&s.y, "moe.y", 4 * m.P * H, true},
		{&s.ab, "moe.ab", 2 * rows * H, m.q4GU},
		{&s.ainv, "moe.ainv", 4 * rows, m.q4GU},
		{&s.zb, "moe.zb", 2 * m.P * F, m.q4Down},
		{&s.zinv, "moe.zinv", 4 * m.P, m.q4Down},
	} {
		if !a.need {
			continue
		}
		var err error
		if *a.p, err = c.scratch.ptr(a.name, a.n); err != nil {
			return err
		}
	}
	return nil
}

// grid1 is a 1-D grid or block of n.
func grid1(n int) [3]uint32 { return [3]uint32{uint32(n), 1, 1} }

// moeRoute queues the routing: r = ((RMSNorm(x)·scale)·root), logits =
// r·Routerᵀ (f32 SGEMM on the router weight, decoded to f32 scratch unless
// it is f32), softmax and top-K: the slots' experts (idx) and weights (wts).
func (c *backend) moeRoute(m *moeCall) error {
	rk, err := c.ops.module("router.kern")
	if err != nil {
		return err
	}
	if err := rk.Launch("moe_router_norm_f32", grid1(m.rows), grid1(normThreads), 0,
		m.x, m.rscale, m.s.r, uint32(m.H), m.eps, m.root); err != nil {
		return err
	}
	rwp := m.router.b.Ptr()
	if !m.router.f32 {
		if err := c.dequant(m.s.rw, m.router); err != nil {
			return err
		}
		rwp = m.s.rw
	}
	if err := c.d.MatMulNT(m.s.logits, m.s.r, rwp, m.rows, m.E, m.H); err != nil {
		return err
	}
	topkThreads := min(moeMaxExperts, max(32, (m.E+31)/32*32))
	if err := rk.Launch("moe_topk_f32", grid1(m.rows), grid1(topkThreads), 0,
		m.s.logits, m.pes, m.s.idx, m.s.wts, uint32(m.E), uint32(m.K)); err != nil {
		return err
	}
	return c.recordRoutes(m)
}

// RecordRoutes makes every later MoE call append its top-k selection to r
// (api.RouteRecorder); nil stops recording. A recorded call waits for its
// routing and copies the rows·K expert ids to the host: a diagnostic
// output that changes no result.
func (c *backend) RecordRoutes(r *api.Routes) { c.routes = r }

// recordRoutes appends a call's routing to the recorder, if any.
func (c *backend) recordRoutes(m *moeCall) error {
	if c.routes == nil {
		return nil
	}
	ids := make([]uint32, m.P)
	if err := c.d.toHost(Bytes(ids), m.s.idx); err != nil {
		return fmt.Errorf("cuda: record routes: %w", err)
	}
	experts := make([]int, len(ids))
	for i, e := range ids {
		experts[i] = int(e)
	}
	c.routes.Append(m.rows, m.K, experts, nil)
	return nil
}

// moeGroup queues the grouping: pairs per expert, the pair list by expert
// and the tile table(s).
func (c *backend) moeGroup(m *moeCall) error {
	rk, err := c.ops.module("router.kern")
	if err != nil {
		return err
	}
	if err := rk.Launch("moe_count_u32", grid1(m.E), grid1(groupThreads), 0, m.s.idx, m.s.counts, uint32(m.P)); err != nil {
		return err
	}
	if err := rk.Launch("moe_scatter_u32", grid1(m.E), grid1(groupThreads), 0,
		m.s.idx, m.s.counts, m.s.pairs, m.s.tiles, uint32(m.P), uint32(m.E), uint32(m.scatterBM())); err != nil {
		return err
	}
	if !m.q4Table() {
		return nil
	}
	mm, err := c.mmaModule()
	if err != nil {
		return err
	}
	return mm.Launch(mmaTiles, grid1(1), grid1(1024), 0, m.s.counts, m.s.ftiles, uint32(m.E), uint32(m.cfg.bm()))
}

// moeGateUp queues z [P][F] = gelu(gate)·up of every pair.
func (c *backend) moeGateUp(m *moeCall) error {
	if !m.q4GU {
		return c.moeExact(m, m.gateUp, m.u, m.s.z, m.H, m.F, true, [3]uint32{uint32((m.F + 31) / 32), uint32(m.tiles), 1})
	}
	if err := c.moePack(m.u, int64(m.rows), m.H, m.s.ab, m.s.ainv); err != nil {
		return err
	}
	return c.q4Launch(m.cfg, q4GateUp, m.gateUp, m.s.ab, m.s.ainv, m.s.pairs, m.q4Tiles(), m.s.wts, m.s.z,
		m.H, m.F, 0, m.K, [3]uint32{uint32((m.F + 63) / 64), uint32(m.fTiles), 1})
}

// moeDown queues y [P slots][H] = down(z) times the slot weight.
func (c *backend) moeDown(m *moeCall) error {
	if !m.q4Down {
		return c.moeExact(m, m.down, m.s.z, m.s.y, m.F, m.H, false, [3]uint32{uint32((m.H + 63) / 64), uint32(m.tiles), 1})
	}
	if err := c.moePack(m.s.z, m.P, m.F, m.s.zb, m.s.zinv); err != nil {
		return err
	}
	return c.q4Launch(m.cfg, q4Down, m.down, m.s.zb, m.s.zinv, m.s.pairs, m.q4Tiles(), m.s.wts, m.s.y,
		m.F, m.H, 0, m.K, [3]uint32{uint32((m.H + 127) / 128), uint32(m.fTiles), 1})
}

// moeExact queues moe_expert_f32 for weight wt (gate/up when gateup, else
// down) reading activations a with reduction width kd into out of width
// nout.
func (c *backend) moeExact(m *moeCall, wt *cudaWeight, a, out Ptr, kd, nout int, gateup bool, grid [3]uint32) error {
	f, dt := wt.resident()
	dec, err := decoderOf(f, dt, wt.geom, wt.b.Ptr())
	if err != nil {
		return err
	}
	rk, err := c.ops.module("router.kern")
	if err != nil {
		return err
	}
	gu := uint32(0)
	if gateup {
		gu = 1
	}
	return rk.Launch("moe_expert_f32", grid, grid1(256), 0,
		dec.p[0], dec.p[1], dec.p[2], a, m.s.pairs, m.s.tiles, m.s.wts, out, dec.code, dec.bits,
		uint32(kd), uint32(nout), uint32(m.K), gu, dec.matRows)
}

// moeCombine queues out[t] = Σ_j y[t·K + j] in slot order (four columns a
// thread where a q4 GEMM ran and H % 4 == 0: the same sums).
func (c *backend) moeCombine(m *moeCall) error {
	rows, H := int64(m.rows), int64(m.H)
	if (m.q4GU || m.q4Down) && m.H%4 == 0 {
		mm, err := c.mmaModule()
		if err != nil {
			return err
		}
		return mm.Launch(mmaCombine4, grid1(int(c.ops.gridFor(rows*H/4, groupThreads))), grid1(groupThreads), 0,
			m.s.y, m.out, uint32(m.rows), uint32(m.H), uint32(m.K))
	}
	rk, err := c.ops.module("router.kern")
	if err != nil {
		return err
	}
	return rk.Launch("moe_combine_f32", grid1(int(c.ops.gridFor(rows*H, groupThreads))), grid1(groupThreads), 0,
		m.s.y, m.out, uint32(m.rows), uint32(m.H), uint32(m.K))
}
