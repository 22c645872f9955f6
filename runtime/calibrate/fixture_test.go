package calibrate

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// The committed importance matrices of the trained checkpoints
// (testdata/{trained,converging}/calib.imatrix.safetensors, which the
// quality table and the quantize tests read) are what dgq calibrate makes
// today from the snapshot folder (a hub-layout folder outside the
// configured cache: copied into a temporary bf16 pack) with the default
// options: the same tensors and metadata, the counts exactly, every
// in_sum2 within 1e-4 relative (the cpu backend is deterministic on one
// architecture; another one's float32 forward pass differs by contraction
// at about 1e-6 relative per value, and the sums of squares at twice that).
func TestFixtureImatrices(t *testing.T) {
	if testing.Short() {
		t.Skip("two calibration runs of 32 windows")
	}
	for _, c := range []string{"converging", "trained"} {
		t.Run(c, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", c)
			out := filepath.Join(t.TempDir(), "x.imatrix.safetensors")
			r := run(t, Options{Source: fixture.SnapshotDir(t, c), Text: filepath.Join(dir, "calib.txt"), Out: out,
				Windows: DefaultWindows, PromptLen: DefaultPromptLen})
			if r.SourceKind != "snapshot_copy" {
				t.Errorf("source kind %s", r.SourceKind)
			}
			wm, _, want := readST(t, filepath.Join(dir, "calib.imatrix.safetensors"))
			gm, _, got := readST(t, out)
			for _, k := range []string{"text_sha256", "windows", "positions", "prompt_len", "canvas", "noise_rates", "seed"} {
				if gm[k] != wm[k] {
					t.Errorf("metadata %s: %q, committed %q", k, gm[k], wm[k])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d tensors, committed %d", len(got), len(want))
			}
			for name, w := range want {
				g, ok := got[name]
				if !ok || len(g) != len(w) {
					t.Fatalf("%s: %d values, committed %d", name, len(g), len(w))
				}
				var num, den float64
				for i := range w {
					if strings.HasSuffix(name, ".counts") && g[i] != w[i] {
						t.Errorf("%s[%d] = %g, committed %g", name, i, g[i], w[i])
					}
					d := float64(g[i]) - float64(w[i])
					num, den = num+d*d, den+float64(w[i])*float64(w[i])
				}
				if den > 0 && math.Sqrt(num/den) > 1e-4 {
					t.Errorf("%s: relative difference %.3g from the committed file", name, math.Sqrt(num/den))
				}
			}
		})
	}
}
