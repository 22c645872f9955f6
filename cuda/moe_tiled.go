package cuda

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/dgq-dev/dgq/codecs"
)

// moeTiledSource holds the tiled tensor-core q4 expert GEMMs (the default
// PrecisionBF16 path of MoE; docs/cuda.md, "MoE").
//
//go:embed kernels/moe_tiled.cu
var moeTiledSource string

// Geometry of moe_tiled.cu (TL_N, TL_M, TL_AS, TL_S, TL_STAGE there).
const (
	tlRows    = 64
	tlPairs   = 64
	tlARow    = 72
	tlStages  = 4
	tlStage   = tlRows*32 + tlRows*8 + tlPairs*tlARow*2
	tlThreads = 128
)

// tiledFits says whether the tiled kernels take a reduction width: whole
// steps of two q4 groups.
func tiledFits(kd int) bool { return kd > 0 && kd%64 == 0 }

// moeTiledOn says whether MoE's fast path uses moe_tiled.cu
// (DGQ_MOE_KERNEL=tiled) rather than moe_mma.cu's q4 GEMM (the default,
// faster at the model's shape: docs/cuda.md, "MoE").
func moeTiledOn() bool { return os.Getenv("DGQ_MOE_KERNEL") == "tiled" }

// tiledModule compiles moe_tiled.cu once per backend.
func (c *backend) tiledModule() (*Module, error) {
	st := c.moeState()
	if st.tiled != nil {
		return st.tiled, nil
	}
	m, err := c.d.Compile("moe_tiled.cu", moeTiledSource)
	if err != nil {
		return nil, err
	}
	st.tiled = m
	return m, nil
}

// moeGather queues moe_gather_bf16: rows × kd f32 from src (row p = token
// pairs[p]/topk when topk > 0, else row p) to plain bf16 rows at dst.
func (c *backend) moeGather(tm *Module, src, pairs Ptr, topk uint32, rows int64, kd int, dst Ptr) error {
	const block = 256
	return tm.Launch("moe_gather_bf16", [3]uint32{c.ops.gridFor(rows*int64(kd/2), block), 1, 1}, [3]uint32{block, 1, 1}, 0,
		src, pairs, topk, uint32(rows), uint32(kd), dst)
}

// tiledLaunch queues moe_tl_gateup (gateup) or moe_tl_down on the q4 weight
// wt (kd columns) for the pairs of the tile table: a the pairs' bf16
// activations, out the result of width nout.
func (c *backend) tiledLaunch(tm *Module, gateup bool, wt *cudaWeight, a, pairs, tiles, wts, out Ptr, kd, nout int, maxTiles int64) error {
	if wt.f != codecs.Q4 || wt.f32 || !tiledFits(kd) {
		return fmt.Errorf("cuda: tiled MoE GEMM of a %v weight of width %d", wt.f, kd)
	}
	pl, err := planarLayout(codecs.Q4, wt.dt, wt.geom)
	if err != nil {
		return err
	}
	p := pl.ptrs(wt.b.Ptr(), 0)
	kernel, cols := "moe_tl_down", tlRows
	if gateup {
		kernel, cols = "moe_tl_gateup", tlRows/2
	}
	const shared = tlStages * tlStage
	return tm.Launch(kernel, [3]uint32{uint32((nout + cols - 1) / cols), uint32(maxTiles), 1}, [3]uint32{tlThreads, 1, 1}, shared,
		p[0], p[1], p[2], a, pairs, tiles, wts, out, uint32(kd), uint32(nout))
}
