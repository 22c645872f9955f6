package conformance

import (
	"math"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// The bounds of the suite (backend.Backend documents them). Each op's bound
// has two parts: an arithmetic budget, the constant below, which covers the
// f32 sums, products and roundings of any order the contract allows; and,
// where the op calls math functions, a term derived from the documented
// bounds of both sides' functions (Tolerances, from each backend's
// Caps().Numerics), so that a backend is held to what its vendor promises.
const (
	// RMSNormRel bounds the relative error of each RMSNorm output: f32
	// sums of up to a few thousand squares in any order stay within ~1e-6
	// of the float64 sum, and 1/√m halves that.
	RMSNormRel = 2e-6
	// MatMulRel bounds each MatMulNT output's error relative to Σ|a·w|:
	// f32 accumulation (blocked or tree) over K ≤ 4096.
	MatMulRel = 1e-5
	// RoPEAbs bounds each RoPE output's error relative to the largest |x|
	// of its head vector: the f32 products and sum (8ε for both sides), and
	// cos and sin of the same f32 angle a few ulp apart.
	RoPEAbs = 2e-6
	// EntropyAbs bounds RowStats' entropy error in nats (f32 sums over up
	// to 262144 values); argmax is exact except on rows whose top two
	// tempered logits are within ArgmaxGap, which are not compared.
	EntropyAbs = 1e-5
	ArgmaxGap  = 1e-6

	// GeluMulRel and GeluMulAbs bound GeluMul's error: |y − ref| ≤
	// (GeluMulRel·|gelu(x)| + GeluMulAbs·|x|)·|u|, gelu(x) the exact
	// (float64) value. The relative term is the f32 polynomial and
	// products; the |x| term is the cancellation in 1 + tanh(z) for large
	// negative x, where an error of tanh near −1 is absolute and 0.5·x
	// multiplies it.
	GeluMulRel = 2e-6
	GeluMulAbs = 1e-7
	// SoftEmbedRel bounds SoftEmbed's error relative to scale·Σ_v
	// p[v]·|table[v][i]| (f32 sums over the vocabulary in any order), and
	// SoftmaxRel is the error allowed on each probability p[v] (an f32 exp
	// and an f32 sum of the weights); the bound is their sum times that
	// magnitude.
	SoftEmbedRel = 1e-5
	SoftmaxRel   = 2e-6
	// AttentionRel bounds each Attention output: |out − ref| ≤
	// AttentionRel·(1 + S)·max_j|v_j|, S the largest Σ_d |q_d·k_jd| over
	// the keys j the query sees and max_j|v_j| the largest |value| of those
	// keys (all head dims). An f32 score is within a few ε·Σ_d|q_d·k_jd| of
	// the exact one (ε = 2⁻²⁴; blocked or tree sums over ≤ 512 dims), and
	// softmax is shift-invariant, so score errors δ_j move the output by
	// Σ_j p_j·(δ_j − Σ p·δ)·v_j ≤ 2·max|δ|·max|v|: the S term. The f32 sum
	// of the weights, the normalization and the f32 weighted sum of the
	// values add a few ε relative to Σ_j p_j·|v_j| ≤ max|v|: the 1 term.
	// 2e-6 is about 16 ε.
	AttentionRel = 2e-6
	// MoERel and MoEAbs bound each MoE output: |out − ref| ≤
	// MoERel·max|ref row| + MoEAbs (f32 matmuls over H and F, gelu and the
	// weighted sum). Rows whose K-th and (K+1)-th router probabilities are
	// within RouterGap may select another expert and are not compared.
	// MoERel (about 1700ε) also holds the math functions: the router's exp
	// moves each weight by 4ε·U_exp relative (Tolerances.Softmax's share),
	// and tanh's absolute error εU|x|·|u| per hidden value, summed over F
	// random down-projection weights, is ~√F·2·εU of the row's scale: at
	// Metal's bounds (U_exp 4, U_tanh 5) and F = 704 under 300ε.
	MoERel    = 1e-4
	MoEAbs    = 1e-6
	RouterGap = 1e-5
	// CategoricalRel: Categorical must draw the reference's index, except
	// that a draw on the other side of a cumulative weight c (float64
	// prefix sums of exp(z − max)) is accepted when the reference's target
	// u·Σw is within CategoricalRel·c (plus Tolerances.Categorical·c) of
	// every such c between the two draws (an f32 cumulative sum or target
	// may land on either side).
	CategoricalRel = 1e-5
)

// eps is f32's unit roundoff, 2⁻²⁴: a result within U ulp of the exact x
// is within 2ε·U·|x| of it (an ulp of x is at most 2⁻²³·|x|).
const eps = 0x1p-24

// Tolerances are the math-function terms of the suite's bounds, derived
// from the documented bounds of the backend under test (dev) and of the
// reference (ref); each adds to the arithmetic budget of its op (the
// constants above).
type Tolerances struct {
	// RMSNorm: relative, 2ε·(U_rsqrt(dev) + U_rsqrt(ref)).
	RMSNorm float64
	// RoPE: relative to max|x| of the head vector. Both sides rotate with
	// the same f32 angle; each cos and sin is within U ulp ≤ 2εU of the
	// exact value, and y = x₀·c − x₁·s moves by at most (|x₀| + |x₁|)·2εΔU
	// ≤ 4ε·(U_trig(dev) + U_trig(ref))·max|x|.
	RoPE float64
	// Softcap: relative to |ref| (there is no arithmetic budget: the whole
	// bound). Both sides divide z/cap identically (correctly rounded); the
	// two tanh are within 2ε·U of the exact value each, and each side rounds
	// the product by cap once (ε each): 2ε·(U_tanh(dev) + U_tanh(ref)) + 2ε.
	Softcap float64
	// EntropyExp and EntropyLog: RowStats' entropy H = log S − Σ p·a (a the
	// tempered logits less their maximum) moves, when every exp is off by a
	// relative δ ≤ 2εU, by at most max|δ|·(1 + Σ p·|a − ā|) (first order),
	// and by log's own error 2εU_log·|log S|: per row the bound adds
	// EntropyExp·(1 + Σ p·|a − ā|) + EntropyLog·log S, both measured on the
	// reference's logits in float64.
	EntropyExp, EntropyLog float64
	// GeluMul: the |x| term's share, ε·(G(dev) + G(ref)) with G =
	// max(U_tanh, 2·U_exp): an error of 2εU·|t| ≤ 2εU in t = tanh(·) moves
	// 0.5·x·(1 + t) by εU·|x|; an implementation through exp, x/(1 +
	// e^(−2z)), is off by at most the exp's relative error 2εU_exp times
	// |gelu(x)| ≤ |x|.
	GeluMul float64
	// Softmax: relative error of each probability, 4ε·(U_exp(dev) +
	// U_exp(ref)): each weight exp(a) is off by 2εU, and the sum it is
	// divided by by as much.
	Softmax float64
	// Attention: relative to max_j|v_j|, 4ε·(U_exp(dev) + U_exp(ref)):
	// weights off by 2εU·2 each side move Σ_j p_j·v_j by at most that times
	// max|v|.
	Attention float64
	// Categorical: relative to a cumulative weight, 4ε·(U_exp(dev) +
	// U_exp(ref)): each weight and so each cumulative sum and the target
	// u·Σw move by 2εU relative on each side.
	Categorical float64
	// SubnormalAbs is the absolute error a flushed subnormal may add to a
	// value: 2⁻¹²⁶ when the backend may flush, 0 otherwise.
	SubnormalAbs float64
}

// TolerancesFor derives the math-function terms for a backend of numerics
// dev compared with a reference of numerics ref.
func TolerancesFor(dev, ref backend.Numerics) Tolerances {
	d, r := dev.ULP, ref.ULP
	trig := max(d.Sin, d.Cos) + max(r.Sin, r.Cos)
	t := Tolerances{
		RMSNorm:     2 * eps * (d.Rsqrt + r.Rsqrt),
		RoPE:        4 * eps * trig,
		Softcap:     2*eps*(d.Tanh+r.Tanh) + 2*eps,
		EntropyExp:  2 * eps * (d.Exp + r.Exp),
		EntropyLog:  2 * eps * (d.Log + r.Log),
		GeluMul:     eps * (max(d.Tanh, 2*d.Exp) + max(r.Tanh, 2*r.Exp)),
		Softmax:     4 * eps * (d.Exp + r.Exp),
		Attention:   4 * eps * (d.Exp + r.Exp),
		Categorical: 4 * eps * (d.Exp + r.Exp),
	}
	if dev.FlushSubnormals || ref.FlushSubnormals {
		t.SubnormalAbs = math.SmallestNonzeroFloat32 * (1 << 23) // 2⁻¹²⁶
	}
	return t
}
