package metal

import (
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// MoE on the engine, four stages with no host round trip, as the CUDA
// backend's f32 path runs them with the same kernels (docs/cuda.md, "MoE on
// the device"):
//
//   - routing: router.kern's moe_router_norm_f32, the router logits by
//     gemm.metal (r·Routerᵀ over the router weight in its stored format),
//     moe_topk_f32 (softmax, top-K, slot weights);
//   - grouping: moe_count_u32 and moe_scatter_u32 (pairs by expert, in slot
//     order, and the tile table);
//   - experts: moe_expert_f32 for gate/up (gelu(gate)·up) and down (times
//     the slot weight), weights decoded in the kernel, or with MoESimdgroup
//     moe.metal's moe_expert_sg_f32 (the same work on SIMD-group matrices);
//   - combine: moe_combine_f32, each token's slots summed in slot order.

// Limits and tiling of the MoE's kernels.
const (
	moeBM         = 64   // moe_expert_f32's pairs per tile (MOE_BM)
	moeSGBM       = 32   // moe_expert_sg_f32's pairs per tile (ME_BM)
	moeSGBN       = 32   // … and output columns per group (ME_BN)
	moeSGThreads  = 128  // … and its group size (ME_THREADS)
	moeMaxExperts = 1024 // moe_topk_f32's shared arrays
	moeThreads    = 256  // the expert kernel's group size (and the grouping kernels' largest)
)

// Scratch of a MoE call.
const (
	scrMoER      = "moe.r"
	scrMoELogits = "moe.logits"
	scrMoEIdx    = "moe.idx"
	scrMoEWts    = "moe.wts"
	scrMoECounts = "moe.counts"
	scrMoEPairs  = "moe.pairs"
	scrMoETiles  = "moe.tiles"
	scrMoEZ      = "moe.z"
	scrMoEY      = "moe.y"
)

// moeCall is one MoE call: its operands, shape and scratch.
type moeCall struct {
	out, u, x, rscale, pes *metalBuf
	router, gateUp, down   *metalWeight
	eps, root              float32
	rows, E, H, F, K       int
	P                      int64 // token-expert pairs, rows·K
	bm                     int   // pairs per tile of the table (the expert kernel's)
	tiles                  int64 // bound on the tile table's tiles

	r, logits, idx, wts, counts, pairs, tileTab, z, y Mem
}

func (b *metalBackend) MoE(out, u, x backend.Buf, rows int, w backend.MoEWeights) error {
	m, err := b.moePlan(out, u, x, rows, w)
	if err != nil {
		return err
	}
	for _, stage := range []func(*moeCall) error{b.moeRoute, b.moeGroup, b.moeExperts, b.moeCombine} {
		if err := stage(m); err != nil {
			return err
		}
	}
	return nil
}

// moePlan checks a call, resolves its operands and takes its scratch.
func (b *metalBackend) moePlan(out, u, x backend.Buf, rows int, w backend.MoEWeights) (*moeCall, error) {
	E, H, F, err := backend.CheckMoE(out, u, x, rows, w)
	if err != nil {
		return nil, err
	}
	p, err := b.operands(nil, out, u, x, w.RouterScale, w.PerExpertScale)
	if err != nil {
		return nil, err
	}
	m := &moeCall{out: p[0], u: p[1], x: p[2], rscale: p[3], pes: p[4], eps: w.Eps, root: w.RouterRoot,
		rows: rows, E: E, H: H, F: F, K: w.TopK}
	for _, a := range []struct {
		dst **metalWeight
		w   backend.Weight
	}{{&m.router, w.Router}, {&m.gateUp, w.GateUp}, {&m.down, w.Down}} {
		if *a.dst, err = b.weight(a.w); err != nil {
			return nil, err
		}
	}
	m.P = int64(rows) * int64(m.K)
	m.bm = moeBM
	if b.o.MoE == MoESimdgroup {
		m.bm = moeSGBM
	}
	m.tiles = (m.P + int64(E)*int64(m.bm-1)) / int64(m.bm)
	switch {
	case E > moeMaxExperts:
		return nil, fmt.Errorf("%w: metal: MoE of %d experts (at most %d)", ErrArgument, E, moeMaxExperts)
	case m.P >= 1<<24:
		return nil, fmt.Errorf("%w: metal: MoE of %d token-expert pairs (fewer than 2^24)", ErrArgument, m.P)
	case m.tiles > 65535:
		return nil, fmt.Errorf("%w: metal: MoE of %d tiles (at most 65535)", ErrArgument, m.tiles)
	case H >= 1<<24 || F >= 1<<24:
		return nil, fmt.Errorf("%w: metal: MoE of width %d, expert width %d", ErrArgument, H, F)
	}
	rw, e, h, f := int64(rows), int64(E), int64(H), int64(F)
	for _, s := range []struct {
		dst  *Mem
		name string
		n    int64
	}{
		{&m.r, scrMoER, 4 * rw * h}, {&m.logits, scrMoELogits, 4 * rw * e}, {&m.idx, scrMoEIdx, 4 * m.P},
		{&m.wts, scrMoEWts, 4 * m.P}, {&m.counts, scrMoECounts, 4 * e}, {&m.pairs, scrMoEPairs, 4 * m.P},
		{&m.tileTab, scrMoETiles, 4 * (1 + 3*m.tiles)}, {&m.z, scrMoEZ, 4 * m.P * f}, {&m.y, scrMoEY, 4 * m.P * h},
	} {
		if *s.dst, err = b.scratchMem(s.name, s.n); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// moeRoute queues the routing: r = ((RMSNorm(x)·scale)·root), logits =
// r·Routerᵀ, softmax and top-K: the slots' experts (idx) and weights (wts).
func (b *metalBackend) moeRoute(m *moeCall) error {
	if err := b.launch("router.kern", "moe_router_norm_f32", [3]int{m.rows}, [3]int{fitThreads(m.H, rowThreads)},
		bufArg(m.x, 0), bufArg(m.rscale, 0), memArg(m.r, 0), u32Arg(uint32(m.H)), f32Arg(m.eps), f32Arg(m.root)); err != nil {
		return err
	}
	if err := b.gemm(memArg(m.logits, 0), memArg(m.r, 0), m.router, m.rows, m.E, m.H, true); err != nil {
		return err
	}
	topk := min(moeMaxExperts, max(32, (m.E+31)/32*32))
	if err := b.launch("router.kern", "moe_topk_f32", [3]int{m.rows}, [3]int{topk},
		memArg(m.logits, 0), bufArg(m.pes, 0), memArg(m.idx, 0), memArg(m.wts, 0), u32Arg(uint32(m.E)), u32Arg(uint32(m.K))); err != nil {
		return err
	}
	return b.recordRoutes(m)
}

// RecordRoutes makes every later MoE call append its top-k selection to r
// (backend.RouteRecorder); nil stops recording. A recorded call runs the
// queued work through its routing and copies the rows·K expert ids to the
// host: a diagnostic output that changes no result.
func (b *metalBackend) RecordRoutes(r *backend.Routes) { b.routes = r }

// recordRoutes appends a call's routing to the recorder, if any.
func (b *metalBackend) recordRoutes(m *moeCall) error {
	if b.routes == nil {
		return nil
	}
	if err := b.e.Sync(); err != nil {
		return fmt.Errorf("metal: record routes: %w", err)
	}
	raw := m.idx.Bytes()
	experts := make([]int, m.P)
	for i := range experts {
		experts[i] = int(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
	}
	b.routes.Append(m.rows, m.K, experts, nil)
	return nil
}

// moeGroup queues the grouping: pairs per expert, the pair list by expert
// and the tile table.
func (b *metalBackend) moeGroup(m *moeCall) error {
	threads := fitThreads(int(m.P), moeThreads) // each thread a run of the P slots
	if err := b.launch("router.kern", "moe_count_u32", [3]int{m.E}, [3]int{threads},
		memArg(m.idx, 0), memArg(m.counts, 0), u32Arg(uint32(m.P))); err != nil {
		return err
	}
	return b.launch("router.kern", "moe_scatter_u32", [3]int{m.E}, [3]int{threads},
		memArg(m.idx, 0), memArg(m.counts, 0), memArg(m.pairs, 0), memArg(m.tileTab, 0),
		u32Arg(uint32(m.P)), u32Arg(uint32(m.E)), u32Arg(uint32(m.bm)))
}

// moeExperts queues z [P][F] = gelu(gate)·up of every pair, then y [P
// slots][H] = down(z) times the slot weight.
func (b *metalBackend) moeExperts(m *moeCall) error {
	gu, down := [3]int{(m.F + 31) / 32, int(m.tiles)}, [3]int{(m.H + 63) / 64, int(m.tiles)}
	if b.o.MoE == MoESimdgroup {
		gu[0], down[0] = (m.F+moeSGBN-1)/moeSGBN, (m.H+moeSGBN-1)/moeSGBN
	}
	if err := b.moeExpert(m, m.gateUp, memArg(m.u.m, 0), memArg(m.z, 0), m.H, m.F, true, gu); err != nil {
		return err
	}
	return b.moeExpert(m, m.down, memArg(m.z, 0), memArg(m.y, 0), m.F, m.H, false, down)
}

// moeExpert queues the expert kernel (moe_expert_f32, or moe_expert_sg_f32
// with MoESimdgroup: the same arguments) for weight w (gate/up when gateup,
// else down) reading activations a of reduction width kd into out of width
// nout.
func (b *metalBackend) moeExpert(m *moeCall, w *metalWeight, a, out Arg, kd, nout int, gateup bool, groups [3]int) error {
	gu := uint32(0)
	if gateup {
		gu = 1
	}
	unit, kernel, threads := "router.kern", "moe_expert_f32", moeThreads
	if b.o.MoE == MoESimdgroup {
		unit, kernel, threads = "moe.metal", "moe_expert_sg_f32", moeSGThreads
	}
	pl, code, bits, matRows := w.decodeArgs()
	return b.launch(unit, kernel, groups, [3]int{threads}, pl[0], pl[1], pl[2], a,
		memArg(m.pairs, 0), memArg(m.tileTab, 0), memArg(m.wts, 0), out, code, bits,
		u32Arg(uint32(kd)), u32Arg(uint32(nout)), u32Arg(uint32(m.K)), u32Arg(gu), matRows)
}

// moeCombine queues out[t] = Σ_j y[t·K + j] in slot order.
func (b *metalBackend) moeCombine(m *moeCall) error {
	return b.stride("router.kern", "moe_combine_f32", int64(m.rows)*int64(m.H), memArg(m.y, 0), bufArg(m.out, 0),
		u32Arg(uint32(m.rows)), u32Arg(uint32(m.H)), u32Arg(uint32(m.K)))
}
