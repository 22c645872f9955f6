package cuda

import (
	"errors"
	"maps"
	"testing"

	api "github.com/dgq-dev/dgq/runtime/backend"
)

// TestKernelPlan checks the kernel chosen per op from the options and the
// device, as Caps().Kernels reports it (no GPU needed).
func TestKernelPlan(t *testing.T) {
	for _, c := range []struct {
		o            Options
		major, minor int
		want         map[string]string
	}{
		{Options{}, 9, 0, map[string]string{"attention": "tiled-f32", "matmul": "dequant-sgemm-f32",
			"moe": "exact-f32", "softembed": "dequant-sgemm-f32"}},
		{Options{Attention: AttentionGEMM}, 9, 0, map[string]string{"attention": "gemm-f32", "matmul": "dequant-sgemm-f32",
			"moe": "exact-f32", "softembed": "dequant-sgemm-f32"}},
		{Options{Precision: PrecisionBF16}, 9, 0, map[string]string{"attention": "gemm-tf32",
			"matmul": "bf16:gemmex-bf16 q4:mma-f16 other:dequant-sgemm-f32", "moe": "q4:mma-f16 other:exact-f32",
			"softembed": "bf16:gemmex-bf16 other:dequant-sgemm-f32"}},
		{Options{Precision: PrecisionBF16, Attention: AttentionTiled, Q4Tile: Q4Tile64}, 9, 0, map[string]string{
			"attention": "tiled-f32", "matmul": "bf16:gemmex-bf16 q4:mma-f16-tile64 other:dequant-sgemm-f32",
			"moe": "q4:mma-f16-tile64 other:exact-f32", "softembed": "bf16:gemmex-bf16 other:dequant-sgemm-f32"}},
		{Options{Precision: PrecisionBF16}, 7, 5, map[string]string{"attention": "gemm-tf32",
			"matmul": "bf16:gemmex-bf16 other:dequant-sgemm-f32", "moe": "exact-f32",
			"softembed": "bf16:gemmex-bf16 other:dequant-sgemm-f32"}},
	} {
		if err := c.o.validate(); err != nil {
			t.Fatalf("%+v: %v", c.o, err)
		}
		if got := planKernels(c.o, c.major, c.minor).names(); !maps.Equal(got, c.want) {
			t.Errorf("%+v on sm_%d%d: %v, want %v", c.o, c.major, c.minor, got, c.want)
		}
	}
	for _, o := range []Options{{Precision: 2}, {Attention: -1}, {Attention: 3}, {Q4Tile: 4}} {
		if err := o.validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestOptionsFor checks the registered opener's mapping of a runtime config.
func TestOptionsFor(t *testing.T) {
	for in, want := range map[string]Precision{"": PrecisionF32, "f32": PrecisionF32, "bf16": PrecisionBF16} {
		o, err := optionsFor(api.Config{Precision: in})
		if err != nil || o != (Options{Precision: want}) {
			t.Errorf("precision %q: %+v, %v", in, o, err)
		}
	}
	if _, err := optionsFor(api.Config{Precision: "fp8"}); !errors.Is(err, api.ErrUnknown) {
		t.Errorf("precision fp8: %v, want ErrUnknownBackend", err)
	}
}

// TestQ4Configs checks the Go mirror of moe_mma.cu's instances against the
// shared memory they were sized for.
func TestQ4Configs(t *testing.T) {
	want := []struct {
		bm      int
		threads uint32
		kib     uint32
	}{{32, 128, 57}, {64, 128, 108}, {128, 256, 88}}
	for i, k := range q4Configs {
		if k.bm() != want[i].bm || k.threads() != want[i].threads || k.smem()>>10 != want[i].kib {
			t.Errorf("%s: bm %d, %d threads, %d KiB; want %+v", k.name, k.bm(), k.threads(), k.smem()>>10, want[i])
		}
	}
}
