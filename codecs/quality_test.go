package codecs_test

import (
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/codecs/internal/baseline"
	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

// The acceptance matrix: one DiffusionGemma expert's gate_up shape.
const accRows, accK = 1408, 2816

func encodeStats(t testing.TB, f codecs.Format, m codecs.Matrix, method codecs.Method, src []byte) codecs.Stats {
	t.Helper()
	_, st, err := codecs.EncodeTensor(f, codecs.BF16, m, method, src)
	if err != nil {
		t.Fatalf("%s %s: %v", f, method, err)
	}
	return st
}

// TestSearchBeatsMinMax is the acceptance bound of the searching encoders
// against the engine's own min/max encoders (Method MinMax), on the seeded
// Gaussian and Student-t(3) bf16 matrices of 1408×2816 (128 rows under
// -short): q4 relative RMSE at least 8% below min/max; q5, q6, q8 and
// nvfp4 no worse than min/max; nvfp4 no worse than plain ModelOpt (its
// scale choice without the neighbouring-scale refinement).
//
// "No worse" allows the difference of two summation orders of the same
// N squared errors (N·2^-52 relatively, see statsClose), so that an encoder
// that picks the min/max parameters everywhere passes.
func TestSearchBeatsMinMax(t *testing.T) {
	rows := int64(accRows)
	if testing.Short() {
		rows = 128
	}
	m := codecs.Matrix{Rows: rows, K: accK}
	sumTol := 1 + float64(m.Elements())*0x1p-52
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		for _, tc := range []struct {
			f    codecs.Format
			gain float64 // required relative improvement over min/max
		}{{codecs.Q4, 0.08}, {codecs.Q5, 0}, {codecs.Q6, 0}, {codecs.Q8, 0}, {codecs.NVFP4, 0}} {
			search := encodeStats(t, tc.f, m, codecs.Search, src).RelRMSE()
			minmax := encodeStats(t, tc.f, m, codecs.MinMax, src).RelRMSE()
			t.Logf("%s %s: search %.4f%%, min/max %.4f%% (%.2f%% lower)", tc.f, d, 100*search, 100*minmax, 100*(1-search/minmax))
			want := minmax * (1 - tc.gain)
			if tc.gain == 0 {
				want *= sumTol
			}
			if !(search <= want) {
				t.Errorf("%s %s: search rel RMSE %.4f%%, want ≤ %.4f%% (min/max %.4f%% − %.0f%%)", tc.f, d, 100*search, 100*want, 100*minmax, 100*tc.gain)
			}
		}
		x := make([]float32, m.Elements())
		if err := codecs.ToFloat32(codecs.BF16, src, x); err != nil {
			t.Fatal(err)
		}
		plain := baseline.ModelOpt(x, make([]float32, len(x))).RelRMSE()
		search := encodeStats(t, codecs.NVFP4, m, codecs.Search, src).RelRMSE()
		t.Logf("nvfp4 %s: search %.4f%%, plain ModelOpt %.4f%%", d, 100*search, 100*plain)
		if !(search <= plain*sumTol) {
			t.Errorf("nvfp4 %s: search rel RMSE %.4f%% above plain ModelOpt %.4f%%", d, 100*search, 100*plain)
		}
	}
}
