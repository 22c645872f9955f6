//go:build linux

package metal

import (
	"context"
	"testing"

	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
)

// TestEngineParity runs the whole model on the Metal backend over the host
// engine: the tiny checkpoint's transformers scenarios (prefill, denoising
// with and without self-conditioning, a second block) through model.Engine,
// every tensor within the documented bounds of the reference and every
// float tensor within check.VsCPUF32 of the CPU runtime (check.Parity). A
// bf16 pack is judged against the reference; the q4 and nvfp4 packs, whose
// weights differ from the reference's, are compared with the CPU only. The
// bf16 pack runs with the second MoE kernel (MoESimdgroup) too.
func TestEngineParity(t *testing.T) {
	for _, c := range []struct {
		profile string
		opts    BackendOptions
	}{{"bf16", BackendOptions{}}, {"q4", BackendOptions{}}, {"nvfp4", BackendOptions{}}, {"bf16", BackendOptions{MoE: MoESimdgroup}}} {
		t.Run("tiny/"+c.profile+"/moe-"+c.opts.MoE.String(), func(t *testing.T) {
			m, ref := tinyPack(t, c.profile)
			b := hostBackendWith(t, HostOptions{}, c.opts)
			e, err := model.NewEngine(m, b)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := e.Close(); err != nil {
					t.Error(err)
				}
			})
			r, err := check.Parity(t.Context(), e, ref, check.DefaultBounds())
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cases {
				t.Logf("%-24s max abs %.3g (bound %.3g) vs cpu %.3g argmax %.3f pass %v", c.Name, c.MaxAbsErr, c.Tolerance, c.VsCPU, c.ArgmaxAgree, c.Pass)
			}
			if judged := c.profile == "bf16"; !r.Pass || r.Judged != judged {
				t.Errorf("parity pass %v judged %v (want %v: %s)", r.Pass, r.Judged, judged, r.NoVerdict)
			}
		})
	}
}

// TestEngineGenerateMatchesCPU generates on the Metal backend over the host
// engine in lockstep with the CPU runtime (check.GenerateLockstep: each step
// the CPU denoises the canvas the Metal engine denoised, self-conditioned
// on the Metal engine's own logits): every difference in routing, logits
// and decisions must be explained under f32 arithmetic's tolerances
// (check.LockstepF32), with both backends' routing compared.
func TestEngineGenerateMatchesCPU(t *testing.T) {
	m, _ := tinyPack(t, "bf16")
	e, err := model.NewEngine(m, hostBackend(t, HostOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	prompt := []int{2, 17, 33, 5, 90, 41, 7, 64, 12, 3, 99, 100, 101, 8}
	for _, o := range []generate.Options{
		{Seed: 7, MaxNewTokens: 40, MaxSteps: 6, FirstStepSC: true},
		{Seed: 3, MaxNewTokens: 16, ArgmaxAccept: true, PlateauStop: true},
	} {
		r, err := check.GenerateLockstep(context.Background(), e, prompt, nil, o, check.LockstepF32())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %d steps, %d positions: rerouted %d, undisturbed max |Δ logit| %.3g; flips argmax %d draw %d mask %d",
			o.Seed, r.Steps, r.Positions, r.Rerouted, r.MaxLogitDiff, r.Argmax, r.Draw, r.Mask)
		if !r.RoutesCompared || r.Unexplained() > 0 {
			t.Errorf("seed %d: differences beyond f32 noise (routes compared %v, unexplained %d)", o.Seed, r.RoutesCompared, r.Unexplained())
		}
		if r.Steps == 0 {
			t.Errorf("seed %d: no step ran", o.Seed)
		}
	}
}
