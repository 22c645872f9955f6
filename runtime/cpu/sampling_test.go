package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTemperRow(t *testing.T) {
	logits := []float32{0, 1, -3.5, 29.999, 1e-7, -30}
	const T = float32(0.7083333) // a schedule value that is not a power of two
	out := make([]float32, len(logits))
	TemperRow(logits, T, out)
	for i, z := range logits {
		if out[i] != z/T {
			t.Errorf("out[%d] = %v, want %v", i, out[i], z/T)
		}
	}
	in := slices.Clone(logits)
	TemperRow(in, T, in) // in place
	if !slices.Equal(in, out) {
		t.Errorf("in place: %v, want %v", in, out)
	}
}

func TestEntropy(t *testing.T) {
	uniform := make([]float32, 262144)
	if h := Entropy(uniform); math.Abs(float64(h)-math.Log(262144)) > 1e-5 {
		t.Errorf("uniform entropy %v, want ln 262144 = %v", h, math.Log(262144))
	}
	if h := Entropy([]float32{100, 0, 0}); h < 0 || h > 1e-30 {
		t.Errorf("peaked entropy %v", h)
	}
	ninf := float32(math.Inf(-1))
	if h := Entropy([]float32{50, ninf, 0}); h < 0 || h > 1e-19 || math.IsNaN(float64(h)) {
		t.Errorf("peaked row with -inf: entropy %v", h)
	}
	if h := Entropy([]float32{0, 0, ninf}); math.Abs(float64(h)-math.Ln2) > 1e-7 {
		t.Errorf("entropy with -inf %v, want ln 2", h)
	}
}

func TestArgmaxFirstMaximal(t *testing.T) {
	for _, tc := range []struct {
		row  []float32
		want int
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{-1}, 0},
		{[]float32{float32(math.Inf(-1)), -5, -5}, 1},
		{[]float32{0, 0, 0}, 0},
	} {
		if got := Argmax(tc.row); got != tc.want {
			t.Errorf("Argmax(%v) = %d, want %d", tc.row, got, tc.want)
		}
	}
}

func TestCategorical(t *testing.T) {
	ln3 := float32(math.Log(3)) // p = (0.25, 0.75)
	row := []float32{0, ln3}
	for _, tc := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.2, 0}, {0.2499, 0}, {0.2501, 1}, {0.9999999, 1}, {math.Nextafter(1, 0), 1}} {
		if got := Categorical(row, tc.u); got != tc.want {
			t.Errorf("u=%v: %d, want %d", tc.u, got, tc.want)
		}
	}
	inf := float32(math.Inf(-1))
	row = []float32{inf, 2, inf, 2, inf}
	for _, u := range []float64{0, 0.3, 0.49, 0.51, math.Nextafter(1, 0)} {
		got := Categorical(row, u)
		if got != 1 && got != 3 {
			t.Errorf("u=%v: drew the zero-probability id %d", u, got)
		}
	}
	// Frequencies follow softmax.
	r := rand.New(rand.NewPCG(3, 0))
	row = []float32{0, 1, 2, -1}
	counts := make([]int, len(row))
	const n = 20000
	for range n {
		counts[Categorical(row, r.Float64())]++
	}
	p := make([]float32, len(row))
	softmax(row, p)
	for i := range row {
		if d := math.Abs(float64(counts[i])/n - float64(p[i])); d > 0.015 {
			t.Errorf("id %d: frequency %v, probability %v", i, float64(counts[i])/n, p[i])
		}
	}
}

func TestRoundBF16(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{1, 1},
		{1 + 1.0/256, 1},          // tie → even
		{1 + 3.0/256, 1 + 1.0/64}, // tie → even (up)
		{1 + 1.0/256 + 1.0/65536, 1 + 1.0/128},
		{-2.5, -2.5},
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{math.MaxFloat32, float32(math.Inf(1))},
		{-1e9, -998244352},
	} {
		if got := RoundBF16(tc.in); got != tc.want {
			t.Errorf("bf16(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if nan := RoundBF16(float32(math.NaN())); nan == nan {
		t.Error("NaN not kept")
	}
}
