package cuda

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/runtime"
)

// fixtureEngine quantizes a fixture (the embedded tiny checkpoint, or one of
// the module's testdata/) with a profile and binds it; it returns the model,
// an engine on the GPU at precision p, and the reference directory.
func fixtureEngine(t *testing.T, fixture, profile string, p Precision) (*runtime.Model, *runtime.Engine, string) {
	t.Helper()
	d, _ := device(t)
	tmp := t.TempDir()
	src, ref := filepath.Join(tmp, "snap"), filepath.Join(tmp, "ref")
	if fixture == "tiny" {
		if _, err := testmodel.WriteSnapshot(src); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(ref, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"reference.json", "reference.safetensors"} {
			b, err := testmodel.ReadReference(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ref, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		ref = filepath.Join("..", "testdata", fixture)
		snaps, err := filepath.Glob(filepath.Join(ref, "hub", "models--*", "snapshots", "*"))
		if err != nil || len(snaps) != 1 {
			t.Fatalf("fixture %s: snapshot not found (%v)", fixture, err)
		}
		src = snaps[0]
	}
	out := filepath.Join(tmp, "pack")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: out, Profile: profile}); err != nil {
		t.Fatal(err)
	}
	pk, err := dgq.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pk.Close() })
	m, err := runtime.Bind(runtime.PackWeights(pk))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackend(d, BackendOptions{Precision: p})
	e, err := runtime.NewEngine(m, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, e, ref
}

// The transformers reference scenarios on the GPU: every tensor within the
// documented bounds, and every float tensor within Bounds.VsCPU of the CPU
// runtime (1e-3 in f32; the bf16 precision's own bound).
func TestEngineParity(t *testing.T) {
	cases := []struct {
		fixture, profile string
		p                Precision
	}{
		{"tiny", "bf16", PrecisionF32}, {"wide", "bf16", PrecisionF32}, {"tiny-distinct", "bf16", PrecisionF32},
		{"tiny", "q4", PrecisionF32}, {"tiny", "nvfp4", PrecisionF32}, {"wide", "q4", PrecisionF32},
		{"tiny", "bf16", PrecisionBF16}, {"wide", "q4", PrecisionBF16},
	}
	for _, tc := range cases {
		t.Run(tc.fixture+"/"+tc.profile+"/"+tc.p.String(), func(t *testing.T) {
			m, e, ref := fixtureEngine(t, tc.fixture, tc.profile, tc.p)
			b := runtime.DefaultBounds(m.WeightFormat())
			if tc.p == PrecisionBF16 {
				b.VsCPU = runtime.VsCPUBF16
			}
			r, err := e.Parity(ref, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cases {
				t.Logf("%-24s max abs %.3g (bound %.3g) vs cpu %.3g argmax %.3f pass %v", c.Name, c.MaxAbsErr, c.Tolerance, c.VsCPU, c.ArgmaxAgree, c.Pass)
			}
			if !r.Pass {
				t.Errorf("parity failed (bounds %+v)", b)
			}
		})
	}
}

// Generation on the GPU gives the CPU runtime's tokens, steps and stop
// reason at a fixed seed (docs/cuda.md explains when a draw could differ).
func TestEngineGenerateMatchesCPU(t *testing.T) {
	for _, fx := range []string{"tiny", "wide"} {
		t.Run(fx, func(t *testing.T) {
			m, e, _ := fixtureEngine(t, fx, "bf16", PrecisionF32)
			prompt := []int{2, 17, 33, 5, 90, 41, 7, 64, 12, 3, 99, 100, 101, 8}
			for _, o := range []runtime.GenerateOptions{
				{Seed: 1, MaxNewTokens: 48},
				{Seed: 2},
				{Seed: 7, MaxNewTokens: 40, MaxSteps: 6, FirstStepSC: true},
				{Seed: 3, MaxNewTokens: 16, ArgmaxAccept: true, PlateauStop: true, EmptyReplyReroll: true},
			} {
				want, err := m.Generate(context.Background(), prompt, nil, o)
				if err != nil {
					t.Fatal(err)
				}
				got, err := e.Generate(context.Background(), prompt, nil, o)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("seed %d: %d tokens, %d steps, %s", o.Seed, len(want.Tokens), want.Steps, want.StopReason)
				if !slices.Equal(got.Tokens, want.Tokens) || got.Steps != want.Steps || got.StopReason != want.StopReason {
					t.Errorf("seed %d: gpu %v (%d steps, %s), cpu %v (%d steps, %s)", o.Seed, got.Tokens, got.Steps, got.StopReason, want.Tokens, want.Steps, want.StopReason)
				}
			}
		})
	}
}
