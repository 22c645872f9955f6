package codecs_test

import (
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/codecs/internal/baseline"
	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

// The acceptance matrix: one DiffusionGemma expert's gate_up shape.
const benchRows, benchK = 1408, 2816

// encodeAll encodes a whole bf16 matrix and returns its stats.
func encodeAll(t testing.TB, f codecs.Format, m codecs.Matrix, src []byte) (codecs.Stats, []byte) {
	t.Helper()
	buf, st, err := codecs.EncodeTensor(f, codecs.BF16, m, src)
	if err != nil {
		t.Fatal(err)
	}
	return st, buf
}

// TestAffineBeatsMinMax asserts the acceptance bound: q4 relative
// RMSE at least 8% below plain min/max affine on both distributions (and
// q5/q6 below their baselines).
func TestAffineBeatsMinMax(t *testing.T) {
	rows := int64(benchRows)
	if testing.Short() {
		rows = 128
	}
	m := codecs.Matrix{Rows: rows, K: benchK}
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		x := make([]float32, m.Elements())
		if err := codecs.ToFloat32(codecs.BF16, src, x); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(x))
		for _, tc := range []struct {
			f    codecs.Format
			gain float64 // required relative improvement
		}{{codecs.Q4, 0.08}, {codecs.Q5, 0.03}, {codecs.Q6, 0.02}} {
			base := baseline.MinMax(x, tc.f.Bits(), out).RelRMSE()
			st, _ := encodeAll(t, tc.f, m, src)
			got := st.RelRMSE()
			t.Logf("%s %s: %.4f%% vs min/max %.4f%% (%.1f%% lower)", tc.f, d, 100*got, 100*base, 100*(1-got/base))
			if got > base*(1-tc.gain) {
				t.Errorf("%s %s: rel RMSE %.4f%%, want ≤ %.4f%% (min/max %.4f%% − %.0f%%)", tc.f, d, 100*got, 100*base*(1-tc.gain), 100*base, 100*tc.gain)
			}
		}
		for _, f := range []codecs.Format{codecs.Q8, codecs.NVFP4} {
			st, _ := encodeAll(t, f, m, src)
			t.Logf("%s %s: %.4f%% max %.3g", f, d, 100*st.RelRMSE(), st.MaxAbsErr)
		}
	}
}
