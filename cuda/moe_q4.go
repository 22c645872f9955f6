package cuda

import (
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
)

// The q4 tensor-core GEMM of bf16 precision (moe_mma.cu's q4_gemm: grouped
// gate/up and down for the MoE, q4_dense for MatMulNT). docs/cuda.md, "MoE",
// has its design and numerics.

// q4Config is one instance of moe_mma.cu's q4 GEMM (Q4_INSTANCE there):
// 128·warpsT threads (4 × warpsT warps), tpw n8 tiles of rows per warp, bkg
// groups of 32 per staged chunk, stages chunks in the cp.async ring.
type q4Config struct {
	name                     string
	warpsT, tpw, bkg, stages int
}

// q4Configs are the compiled instances, in the order of Q4Tile32, Q4Tile64,
// Q4Tile128.
var q4Configs = []q4Config{
	{"s", 1, 4, 4, 3}, // bm 32, 4 warps, 128 k a chunk, 57 KiB
	{"m", 1, 8, 4, 4}, // bm 64, 4 warps, 108 KiB
	{"l", 2, 8, 2, 4}, // bm 128, 8 warps, 64 k a chunk, 88 KiB
}

// threads is the block size.
func (k q4Config) threads() uint32 { return uint32(128 * k.warpsT) }

// bm is the rows (token-expert pairs) of one block: the tile table's bm.
func (k q4Config) bm() int { return 8 * k.tpw * k.warpsT }

// smem is the dynamic shared memory of a block (Q4Geo::SMEM): per ring
// stage the codes of 128 weight rows (bkg·2048 bytes), their scale and bias
// words (2·128·(bkg/2+1)·4) and the rows' packed activations (bkg·bm·64).
func (k q4Config) smem() uint32 {
	return uint32(k.stages * (k.bkg*2048 + 2*128*(k.bkg/2+1)*4 + k.bkg*k.bm()*64))
}

// q4Fast reports whether weight w runs the q4 GEMM.
func (c *backend) q4Fast(w *cudaWeight) bool {
	return c.k.q4MMA && !w.f32 && w.f == codecs.Q4 && w.geom.K%32 == 0
}

// q4Pick returns the configuration for a GEMM whose weight slices see about
// avg rows each (pairs per expert, or the rows of a dense product), over at
// most rows rows (the grid's 65535 blocks of bm): the one the backend's
// Q4Tile fixes, else by avg (bm 32 up to 24 rows, 64 up to 48, else 128)
// or the first that fits; ok = false where none fits the device's shared
// memory or the grid.
func (c *backend) q4Pick(avg float64, rows int64) (k q4Config, ok bool) {
	fits := func(k q4Config) bool {
		return (rows+int64(k.bm())-1)/int64(k.bm()) <= 65535 && k.smem() <= c.k.maxSmem
	}
	if c.k.q4Tile != Q4TileAuto {
		k = q4Configs[c.k.q4Tile-Q4Tile32]
		return k, fits(k)
	}
	switch {
	case avg <= 24:
		k = q4Configs[0]
	case avg <= 48:
		k = q4Configs[1]
	default:
		k = q4Configs[2]
	}
	if fits(k) {
		return k, true
	}
	for _, k := range q4Configs {
		if fits(k) {
			return k, true
		}
	}
	return k, false
}

// mmaFile is the CUDA-specific kernel file of the q4 GEMM.
const mmaFile = "moe_mma.cu"

// The plain kernels of moe_mma.cu, launched by these names.
const (
	mmaPackF16    = "moe_pack_f16"
	mmaNarrowBF16 = "narrow_bf16"
	mmaTiles      = "moe_tiles_u32"
	mmaCombine4   = "moe_combine4_f32"
)

// q4Kernel is one of the three kernels each Q4_INSTANCE(NAME, …) of
// moe_mma.cu defines: the prefix of its name, which NAME (the q4Config's
// name) completes.
type q4Kernel string

const (
	q4GateUp q4Kernel = "moe_q4_gateup_"
	q4Down   q4Kernel = "moe_q4_down_"
	q4Dense  q4Kernel = "q4_dense_"
)

// name is the kernel k of configuration cfg ("moe_q4_gateup_s").
func (k q4Kernel) name(cfg q4Config) string { return string(k) + cfg.name }

// mmaKernels lists the kernels of moe_mma.cu the backend launches, in file
// order: the plain kernels, then the q4 GEMM kernels of each q4Config.
func mmaKernels() []string {
	names := []string{mmaPackF16, mmaNarrowBF16, mmaTiles, mmaCombine4}
	for _, cfg := range q4Configs {
		for _, k := range []q4Kernel{q4GateUp, q4Down, q4Dense} {
			names = append(names, k.name(cfg))
		}
	}
	return names
}

// mmaModule returns moe_mma.cu compiled for the device (once, by Ops).
func (c *backend) mmaModule() (*Module, error) { return c.ops.module(mmaFile) }

// q4Launch queues the q4 GEMM kernel k of configuration cfg on weight wt
// (q4, kd columns): a/ainv the packed activations and their row scalings,
// out the result, nout its width; m the rows of q4_dense (0 for the grouped
// kernels), topk the pairs per token (gate/up reads token pair/topk).
func (c *backend) q4Launch(cfg q4Config, k q4Kernel, wt *cudaWeight, a, ainv, pairs, tiles, wts, out Ptr, kd, nout, m, topk int, grid [3]uint32) error {
	if wt.f != codecs.Q4 || wt.f32 {
		return fmt.Errorf("cuda: q4 GEMM of a %s weight", wt.f)
	}
	mm, err := c.mmaModule()
	if err != nil {
		return err
	}
	pl, err := planarLayout(codecs.Q4, wt.dt, wt.geom)
	if err != nil {
		return err
	}
	p := pl.ptrs(wt.b.Ptr(), 0)
	return mm.Launch(k.name(cfg), grid, [3]uint32{cfg.threads(), 1, 1}, cfg.smem(),
		p[0], p[1], p[2], a, ainv, pairs, tiles, wts, out, uint32(kd), uint32(nout), uint32(m), uint32(topk), uint32(wt.geom.Rows))
}

// moePack queues moe_pack_f16: rows × kd f32 from src to fp16 rows at dst
// (the permuted run order of moe_mma.cu), each scaled by a power of two
// whose inverse goes to inv[row]. One warp per row.
func (c *backend) moePack(src Ptr, rows int64, kd int, dst, inv Ptr) error {
	return c.ops.stride(mmaFile, mmaPackF16, rows*32, src, uint32(rows), uint32(kd), dst, inv)
}

// narrowBF16 queues narrow_bf16 of n f32 values at src into the named
// scratch buffer and returns its address.
func (c *backend) narrowBF16(scratch string, src Ptr, n int64) (Ptr, error) {
	dst, err := c.scratch.ptr(scratch, 2*n)
	if err != nil {
		return 0, err
	}
	return dst, c.ops.stride(mmaFile, mmaNarrowBF16, n, src, dst, uint64(n))
}
