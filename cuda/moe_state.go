package cuda

import (
	_ "embed"
	"fmt"
	"os"
	"sync"
)

// moeMMASource is the CUDA-specific source of the fast kernels (q4 grouped
// GEMMs on the tensor cores, bf16 packing).
//
//go:embed kernels/moe_mma.cu
var moeMMASource string

// moeState is a backend's MoE and fast-matmul state: grow-only named scratch
// buffers and the compiled moe_mma.cu module. It lives in a registry keyed by
// the backend (the backend struct is not this file's); closeMoE frees it.
type moeState struct {
	bufs  map[string]*Buffer
	mod   *Module
	tiled *Module // moe_tiled.cu
}

var moeStates sync.Map // *backend → *moeState

func (c *backend) moeState() *moeState {
	if s, ok := moeStates.Load(c); ok {
		return s.(*moeState)
	}
	s, _ := moeStates.LoadOrStore(c, &moeState{bufs: map[string]*Buffer{}})
	return s.(*moeState)
}

// closeMoE frees the backend's MoE scratch and module (Close should call it).
func (c *backend) closeMoE() error {
	v, ok := moeStates.LoadAndDelete(c)
	if !ok {
		return nil
	}
	s := v.(*moeState)
	var first error
	for k, b := range s.bufs {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
		delete(s.bufs, k)
	}
	for _, m := range []**Module{&s.mod, &s.tiled} {
		if *m != nil {
			if err := (*m).Close(); err != nil && first == nil {
				first = err
			}
			*m = nil
		}
	}
	return first
}

// scratch returns the device address of the named scratch buffer, grown to
// at least n bytes (a grown buffer replaces the old one after the queued
// work: Free waits for the stream).
func (s *moeState) scratch(d *Device, name string, n int64) (Ptr, error) {
	n = max(n, 16)
	if b := s.bufs[name]; b != nil {
		if b.Size() >= n {
			return b.Ptr(), nil
		}
		if err := b.Free(); err != nil {
			return 0, err
		}
		delete(s.bufs, name)
	}
	// Round up to 1 MiB past 1 MiB so that slowly growing shapes do not
	// reallocate every call.
	if n > 1<<20 {
		n = (n + 1<<20 - 1) &^ (1<<20 - 1)
	}
	b, err := d.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuda: MoE scratch %s of %d bytes: %w", name, n, err)
	}
	s.bufs[name] = b
	return b.Ptr(), nil
}

// module returns moe_mma.cu compiled for the device.
func (s *moeState) module(d *Device) (*Module, error) {
	if s.mod != nil {
		return s.mod, nil
	}
	m, err := d.Compile("moe_mma.cu", moeMMASource)
	if err != nil {
		return nil, err
	}
	s.mod = m
	return m, nil
}

// moeQ4Config is one instance of moe_mma.cu's q4 GEMM (Q4_INSTANCE there):
// 128·warpsT threads (4 × warpsT warps), tpw n8 tiles of rows per warp, bkg
// groups of 32 per staged chunk, stages chunks in the cp.async ring; v2:
// q4_gemm (scales and biases staged once per block), else q4_gemm_v1.
type moeQ4Config struct {
	name                     string
	v2                       bool
	warpsT, tpw, bkg, stages int
}

// threads is the block size.
func (k moeQ4Config) threads() uint32 { return uint32(128 * k.warpsT) }

// bm is the rows (token-expert pairs) of one block: the tile table's bm.
func (k moeQ4Config) bm() int { return 8 * k.tpw * k.warpsT }

// smem is the dynamic shared memory of a block over a reduction width of
// kd. q4_gemm (Q4Geo::RING plus the scale/bias runs): per ring stage the
// codes of 128 weight rows (bkg·2048 bytes) and the rows' packed
// activations (bkg·bm·64), then the block's scales and biases for the whole
// width, two planes of runs (2 runs of 64 rows for gate/up, 1 of 128
// otherwise) of q4_sb_len halves each. q4_gemm_v1 (Q4GeoV1::SMEM): the
// scale and bias words (2·128·(bkg/2+1)·4) are in each stage instead.
func (k moeQ4Config) smem(kd int, gateup bool) uint32 {
	stage := k.bkg*2048 + k.bkg*k.bm()*64
	if !k.v2 {
		return uint32(k.stages * (stage + 2*128*(k.bkg/2+1)*4))
	}
	g, sbr, nrun := kd/32, 128, 1
	if gateup {
		sbr, nrun = 64, 2
	}
	run := (sbr*g + 14) >> 3 << 3
	return uint32(k.stages*stage + 2*nrun*run*2)
}

// moeQ4Configs are the compiled instances.
var moeQ4Configs = []moeQ4Config{
	{"s", false, 1, 4, 4, 3}, // bm 32, 4 warps, 128 k a chunk, 57 KiB
	{"m", false, 1, 8, 4, 4}, // bm 64, 4 warps, 108 KiB
	{"l", false, 2, 8, 2, 4}, // bm 128, 8 warps, 64 k a chunk, 88 KiB
	{"s2", true, 1, 4, 4, 4}, // bm 32, 4 warps, 128 k a chunk, 64 KiB ring
	{"m2", true, 1, 8, 2, 4}, // bm 64, 4 warps, 64 k a chunk, 48 KiB ring
	{"l2", true, 2, 8, 2, 3}, // bm 128, 8 warps, 64 k a chunk, 60 KiB ring
}

// q4MaxSmem is the most dynamic shared memory a block may ask for on the
// device: 227 KiB on sm_90, 163 KiB on sm_80 and sm_87, 99 KiB on the other
// sm_8x and later.
func (c *backend) q4MaxSmem() uint32 {
	major, minor := c.d.Capability()
	switch {
	case major == 9:
		return 227 << 10
	case major == 8 && (minor == 0 || minor == 7):
		return 163 << 10
	}
	return 99 << 10
}

// moeQ4Force, when not empty, names the configuration that every q4 GEMM
// uses (the timing tests compare them).
var moeQ4Force string

// q4Pick returns the configuration for the GEMMs over widths kds (gate/up
// first when gateup) whose weight slices see about avg rows each (pairs per
// expert, or the rows of a dense product), rows at most the grid's 65535
// blocks of bm; ok = false where none fits the device's shared memory.
func (c *backend) q4Pick(avg float64, rows int64, gateup bool, kds ...int) (k moeQ4Config, ok bool) {
	fits := func(k moeQ4Config) bool {
		if (rows+int64(k.bm())-1)/int64(k.bm()) > 65535 {
			return false
		}
		for i, kd := range kds {
			if k.smem(kd, gateup && i == 0) > c.q4MaxSmem() {
				return false
			}
		}
		return true
	}
	if k = moeQ4Pick(avg); fits(k) {
		return k, true
	}
	for _, k := range moeQ4Configs {
		if fits(k) {
			return k, true
		}
	}
	return k, false
}

// moeQ4Pick returns the preferred configuration for a GEMM whose weight
// slices see about avg rows each: bm 32 up to 24 rows, 64 up to 48, else
// 128; q4_gemm_v1 unless DGQ_MOE_Q4=v2 (or the configuration moeQ4Force
// names).
func moeQ4Pick(avg float64) moeQ4Config {
	name := "l"
	switch {
	case moeQ4Force != "":
		name = moeQ4Force
	case avg <= 24:
		name = "s"
	case avg <= 48:
		name = "m"
	}
	if moeQ4Force == "" && os.Getenv("DGQ_MOE_Q4") == "v2" {
		name += "2"
	}
	for _, k := range moeQ4Configs {
		if k.name == name {
			return k
		}
	}
	return moeQ4Configs[0]
}

// fastMMA reports whether the device runs the moe_mma.cu kernels (bf16
// mma.sync, cvt.rn.bf16x2: sm_80 or later).
func (c *backend) fastMMA() bool {
	major, _ := c.d.Capability()
	return major >= 8
}
