package runtime

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
)

func TestEntropy(t *testing.T) {
	uniform := make([]float32, 262144)
	if h := Entropy(uniform); math.Abs(float64(h)-math.Log(262144)) > 1e-5 {
		t.Errorf("uniform entropy %v, want ln 262144 = %v", h, math.Log(262144))
	}
	if h := Entropy([]float32{100, 0, 0}); h < 0 || h > 1e-30 {
		t.Errorf("peaked entropy %v", h)
	}
	ninf := float32(math.Inf(-1))
	if h := Entropy([]float32{0, 0, ninf}); math.Abs(float64(h)-math.Ln2) > 1e-7 {
		t.Errorf("entropy with -inf %v, want ln 2", h)
	}
}

// The helpers reproduce transformers' step-1 sampler references exactly.
func TestSamplerHelpersOnReference(t *testing.T) {
	for _, fx := range fixtures {
		refs, err := readReference(filepath.Join(refDir(t, fx), "reference.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		sc, H := refs["sc2_logits"].f, refs["step1_entropy"].f
		C := len(H)
		V := len(sc) / C
		ent := make([]float32, C)
		for r := range C {
			ent[r] = Entropy(sc[r*V : (r+1)*V])
			if d := math.Abs(float64(ent[r] - H[r])); d > 2e-6 {
				t.Errorf("%s row %d: entropy %v, want %v", fx, r, ent[r], H[r])
			}
			if a := Argmax(sc[r*V : (r+1)*V]); int64(a) != refs["step1_argmax"].i[r] {
				t.Errorf("%s row %d: argmax %d, want %d", fx, r, a, refs["step1_argmax"].i[r])
			}
		}
		for r, b := range AcceptMask(H, 0.1) {
			if want := refs["step1_accept_mask"].i[r] == 1; b != want {
				t.Errorf("%s row %d: accept %v, want %v", fx, r, b, want)
			}
		}
	}
}

func TestAcceptMask(t *testing.T) {
	cases := []struct {
		h     []float32
		bound float32
		want  []bool
	}{
		{[]float32{3, 1, 2}, 0.1, []bool{false, true, false}},                  // only the lowest
		{[]float32{0.05, 5, 0.04, 0.02}, 0.1, []bool{true, false, true, true}}, // 0, 0.02, 0.06 ≤ 0.1; 0.11 > 0.1
		{[]float32{0.07, 0.04, 0.07}, 0.1, []bool{true, true, false}},          // the tie goes to the lower position
		{[]float32{0.5, 0.5}, 0.1, []bool{true, false}},
		{nil, 0.1, []bool{}},
	}
	for _, c := range cases {
		if got := AcceptMask(c.h, c.bound); !slices.Equal(got, c.want) {
			t.Errorf("AcceptMask(%v, %v) = %v, want %v", c.h, c.bound, got, c.want)
		}
	}
}

func TestArgmaxFirstOfTies(t *testing.T) {
	if a := Argmax([]float32{1, 3, 3, 2}); a != 1 {
		t.Errorf("Argmax = %d, want 1", a)
	}
}
