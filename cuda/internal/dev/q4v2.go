package dev

import (
	_ "embed"
	"fmt"

	"github.com/dgq-dev/dgq/cuda"
)

// q4V2Source is the alternate q4 GEMM (q4_gemm_v2 and its instances).
//
//go:embed q4_gemm_v2.cu
var q4V2Source string

// Q4Source returns the harness's translation unit: moe_mma.cu's
// (cuda.KernelSource: the CUDA prelude, the common include, moe_mma.cu)
// with q4_gemm_v2.cu appended, so that it holds the production instances
// and the alternates side by side.
func Q4Source() (string, error) {
	base, err := cuda.KernelSource("moe_mma.cu")
	if err != nil {
		return "", fmt.Errorf("dev: %w", err)
	}
	return base + "\n#line 1 \"q4_gemm_v2.cu\"\n" + q4V2Source, nil
}

// Q4Instance is one instance of a q4 GEMM in that unit (Q4_INSTANCE):
// kernels moe_q4_gateup_<Name>, moe_q4_down_<Name> and q4_dense_<Name>,
// 128·WarpsT threads, TPW n8 tiles of pairs per warp, BKG groups of 32 per
// staged chunk, Stages chunks in the ring.
type Q4Instance struct {
	Name                     string
	V2                       bool // q4_gemm_v2; else the production q4_gemm
	WarpsT, TPW, BKG, Stages int
}

// Production are moe_mma.cu's instances (cuda's q4Configs), Alternates
// q4_gemm_v2.cu's, pairwise of the same bm.
var (
	Production = []Q4Instance{{"s", false, 1, 4, 4, 3}, {"m", false, 1, 8, 4, 4}, {"l", false, 2, 8, 2, 4}}
	Alternates = []Q4Instance{{"s2", true, 1, 4, 4, 4}, {"m2", true, 1, 8, 2, 4}, {"l2", true, 2, 8, 2, 3}}
)

// Threads is the block size.
func (k Q4Instance) Threads() uint32 { return uint32(128 * k.WarpsT) }

// BM is the pairs (rows of the activations) of one block.
func (k Q4Instance) BM() int { return 8 * k.TPW * k.WarpsT }

// Smem is the dynamic shared memory of a block over a reduction width of
// kd (gateup: the gate/up kernel). q4_gemm: per stage codes, scale and bias
// words and activations. q4_gemm_v2: per stage codes and activations, then
// the block's scales and biases for the whole width, two planes of runs (2
// runs of 64 rows for gate/up, 1 of 128 otherwise) of q4_sb_len halves.
func (k Q4Instance) Smem(kd int, gateup bool) uint32 {
	codesActs := k.BKG*2048 + k.BKG*k.BM()*64
	if !k.V2 {
		return uint32(k.Stages * (codesActs + 2*128*(k.BKG/2+1)*4))
	}
	g, sbr, nrun := kd/32, 128, 1
	if gateup {
		sbr, nrun = 64, 2
	}
	run := (sbr*g + 14) >> 3 << 3
	return uint32(k.Stages*codesActs + 2*nrun*run*2)
}
