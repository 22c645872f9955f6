package conformance

import (
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// The math terms follow from both sides' documented bounds, in units of
// ε = 2⁻²⁴: the CPU against itself is tightest, CUDA's library looser,
// MSL's Table 8.1 loosest; flushing adds 2⁻¹²⁶.
func TestTolerancesFor(t *testing.T) {
	cpu := backend.Numerics{ULP: backend.MathULP{Exp: 0.5, Log: 0.5, Tanh: 0.5, Sin: 0.5, Cos: 0.5, Sqrt: 0.5, Rsqrt: 2, Div: 0.5}}
	apple := backend.Numerics{FlushSubnormals: true, ULP: backend.MathULP{Exp: 4, Log: 4, Tanh: 5, Sin: 4, Cos: 4, Sqrt: 0.5, Rsqrt: 0.5, Div: 0.5}}
	for _, c := range []struct {
		name      string
		dev       backend.Numerics
		want      Tolerances // in units of ε
		subnormal float64
	}{
		{"cpu", cpu, Tolerances{RMSNorm: 8, RoPE: 4, Softcap: 4, EntropyExp: 2, EntropyLog: 2, GeluMul: 2, Softmax: 4, Attention: 4, Categorical: 4}, 0},
		{"apple", apple, Tolerances{RMSNorm: 5, RoPE: 18, Softcap: 13, EntropyExp: 9, EntropyLog: 9, GeluMul: 9, Softmax: 18, Attention: 18, Categorical: 18}, 0x1p-126},
	} {
		got := TolerancesFor(c.dev, cpu)
		w := c.want
		for _, f := range []struct {
			name      string
			got, want float64
		}{
			{"RMSNorm", got.RMSNorm, w.RMSNorm}, {"RoPE", got.RoPE, w.RoPE}, {"Softcap", got.Softcap, w.Softcap},
			{"EntropyExp", got.EntropyExp, w.EntropyExp}, {"EntropyLog", got.EntropyLog, w.EntropyLog},
			{"GeluMul", got.GeluMul, w.GeluMul}, {"Softmax", got.Softmax, w.Softmax}, {"Attention", got.Attention, w.Attention},
			{"Categorical", got.Categorical, w.Categorical},
		} {
			if f.got != f.want*eps {
				t.Errorf("%s %s = %.3g ε, want %g ε", c.name, f.name, f.got/eps, f.want)
			}
		}
		if got.SubnormalAbs != c.subnormal {
			t.Errorf("%s SubnormalAbs = %g", c.name, got.SubnormalAbs)
		}
	}
}
