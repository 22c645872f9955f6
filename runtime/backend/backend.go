package backend

import (
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/codecs"
)

// Backend is where the runtime's arithmetic runs: the CPU reference
// (package runtime/cpu) or an accelerator (packages cuda and metal). It owns device buffers of
// float32 values, uploads of stored tensors from the mapped pack, a kernel
// set, and synchronization.
//
// # Ordering
//
// Ops are queued in call order on one stream: an op sees the results of
// every op called before it. Download waits for the work queued before it;
// Sync waits for everything. An error from an op may also report a failure
// of earlier queued work. A Backend, its Bufs and its Weights are not safe
// for concurrent use.
//
// # Shapes
//
// Matrices are row-major. Buffers are addressed from their start; an op
// reads or writes the first values its shape covers and leaves the rest of
// a larger buffer alone. An op given a Buf or Weight of another backend, a
// freed one, or one too small for its shape returns an error and writes
// nothing.
//
// # Tolerances
//
// Results are compared with the CPU backend by the conformance suite
// (runtime/conformance), with bounds scaled to float32. Where an op calls
// math functions (exp, log, tanh, cos, sin, rsqrt), its bound adds a term
// derived from the documented accuracy of both sides' functions (each
// backend's Caps().Numerics: conformance.TolerancesFor), and a backend that
// may flush subnormals may do so (Numerics.FlushSubnormals); ε = 2⁻²⁴ and
// U the ulp bounds below:
//
//   - Upload, Download, Dequant, Copy, AddScale, Embed (every stored
//     format), Temper and RoundBF16: bit-exact (NaNs may differ in
//     payload; AddScale and Temper may give the flushed result on
//     subnormal inputs or results where the backend may flush).
//   - RMSNorm: |y − ref| ≤ (2e-6 + 2ε·ΔU_rsqrt)·|ref| per value (f32 sums of
//     the squares in any order; the reference sums them in float64).
//   - MatMulNT: |c − ref| ≤ 1e-5·Σ_k |a[k]·w[k]| per value (f32 accumulation
//     in any order; the reference accumulates in float64).
//   - RoPE: |y − ref| ≤ (2e-6 + 4ε·ΔU_trig)·max|x| per value, max|x| over
//     the head vector (the angle is the same f32 product; cos and sin within
//     their bounds).
//   - Softcap: |y − ref| ≤ (2ε·ΔU_tanh + 2ε)·|ref| (tanh within its bound,
//     the product by cap rounded on each side).
//   - RowStats: entropy within 1e-5 nats plus, per row, 2ε·ΔU_exp·(1 + Σ
//     p·|a − ā|) + 2ε·ΔU_log·log S (the first-order effect of the
//     functions' errors; a the tempered logits less their maximum); argmax
//     exact except on rows whose two largest tempered logits are within
//     1e-6 (not compared).
//   - GeluMul: |y − ref| ≤ (2e-6·|gelu(x)| + (1e-7 + ε·ΔU_gelu)·|x|)·|u|
//     per value, gelu exact, ΔU_gelu the sides' max(U_tanh, 2·U_exp) (1 +
//     tanh cancels for large negative x; a form through exp errs by
//     2ε·U_exp relative).
//   - SoftEmbed: |out − ref| ≤ (1e-5 + 2e-6 + 4ε·ΔU_exp)·scale·Σ_v
//     p[v]·|table[v][i]| per value (f32 sums over the vocabulary in any
//     order; each probability within 2e-6 + 4ε·ΔU_exp relative).
//   - Attention: |out − ref| ≤ (2e-6·(1 + S) + 4ε·ΔU_exp)·max_j|v_j| per
//     value, S the largest Σ_d |q_d·k_jd| and max_j|v_j| the largest |value|
//     over the keys the query sees (f32 scores err by a few ε·S and softmax
//     turns a score error δ into at most 2δ·max|v|; the sums and the
//     normalization add a few ε·max|v|; the weights' exp 4ε·U_exp).
//   - MoE: |out − ref| ≤ 1e-4·max|ref row| + 1e-6 per value; rows whose
//     K-th and (K+1)-th router probabilities are within 1e-5 (another
//     expert may be chosen) not compared.
//   - Categorical: the reference's index, except that a draw across a
//     cumulative weight c is accepted when the target u·Σw is within
//     (1e-5 + 4ε·ΔU_exp)·c of every c between the two draws (float64
//     cumulative sums).
//
// ΔU_f is U_f(backend) + U_f(CPU): the CPU's math is float64 rounded once
// (0.5 ulp); CUDA's is the CUDA math library's (exp 2.5, tanh 2.5, sin and
// cos 2.5, log 1.5 ulp of the exact result); Metal's is MSL Table 8.1's
// (exp, log, sin, cos 4, tanh 5).
//
// # Growth
//
// Later ops (RoPE, attention, router, sampler) are added as methods here,
// each with its contract and a conformance test; every backend in this
// repository implements them in the same change. Code outside the
// repository should not implement Backend.
type Backend interface {
	// Name is a short identifier: "cpu", "cuda".
	Name() string
	// Caps describes the device and what the backend keeps on it.
	Caps() Caps

	// Alloc returns a buffer of n float32 values (n ≥ 1), contents
	// undefined.
	Alloc(n int) (Buf, error)
	// Upload copies src to the start of dst (len(src) ≤ dst.Len()).
	Upload(dst Buf, src []float32) error
	// Download copies the first len(dst) values of src into dst
	// (len(dst) ≤ src.Len()) once the work queued before it is done.
	Download(src Buf, dst []float32) error
	// UploadWeight makes a stored tensor of any format and dtype resident,
	// seen as a [Rows, K] matrix (TensorData.Matrix). t.Bytes may be a
	// slice of the mapped pack: the backend does not keep it past the call
	// unless Caps says the backend is the host (the CPU backend reads the
	// mapping in place, so the pack must stay open).
	UploadWeight(t TensorData) (Weight, error)

	// Sync waits for all queued work and returns its first error.
	Sync() error
	// Close releases the backend's own resources (not the Bufs and Weights
	// it returned: free those first). It does not close a device it was
	// given.
	Close() error

	// RMSNorm writes y[r] = RMSNorm(x[r])·w for rows r < rows of n values
	// (MODEL_SPEC §3.1.1: m = mean(x²) + eps, y = x·(1/√m)·w, the scale is
	// w, not 1 + w). w holds n values, or is nil for the unscaled form.
	// y may be x.
	RMSNorm(y, x, w Buf, rows, n int, eps float32) error
	// Dequant writes the whole weight as float32 ([Rows][K], Rows·K values)
	// to out, exactly as codecs.DecodeRows decodes it.
	Dequant(out Buf, w Weight) error
	// MatMulNT writes c = a·wᵀ: a is [m][K], w a weight [N][K] in any
	// format, c is [m][N] (PyTorch's linear layer x·Wᵀ). m = 0 does
	// nothing. c must not be a.
	MatMulNT(c, a Buf, w Weight, m int) error

	// RoPE rotates x [rows][heads][headDim] in place (MODEL_SPEC §3.1.3):
	// every head of row r at position pos0 + r, split-half pairs
	// (j, j+headDim/2), angle f32(p)·invFreq[j] as an f32 product, cos and
	// sin rounded to f32, y = x·cos + rotate_half(x)·sin with each product
	// rounded to f32. invFreq holds headDim/2 values (model.RoPEInvFreq, uploaded
	// once; zero for the pairs a proportional rope leaves alone).
	RoPE(x Buf, rows, heads, headDim, pos0 int, invFreq Buf) error
	// Softcap replaces the first n values z of x by cap·tanh(z/cap) in f32
	// (MODEL_SPEC §3.7).
	Softcap(x Buf, n int, cap float32) error
	// RowStats reads rows of v logits z and, for each row r, writes to
	// entropy[r] the entropy in nats of softmax(z/T) (Entropy of TemperRow's
	// output, MODEL_SPEC §4.3.5) and to argmax[r] the first index of the
	// largest z/T, as a float32 value. T > 0.
	RowStats(logits Buf, rows, v int, temperature float32, entropy Buf, argmax Buf) error

	// Copy copies n values from src[srcOff…] to dst[dstOff…] (the ranges
	// must not overlap when src is dst).
	Copy(dst Buf, dstOff int, src Buf, srcOff int, n int) error
	// AddScale writes x[i] = (x[i] + y[i])·s for i < n, the sum and the
	// product each rounded to f32 (s = 1: a residual add).
	AddScale(x, y Buf, n int, s float32) error
	// GeluMul writes g[i] = gelu(g[i])·u[i] for i < n: PyTorch's tanh GELU
	// (MODEL_SPEC §3.1.2) rounded to f32, then the f32 product.
	GeluMul(g, u Buf, n int) error
	// Embed writes out[t] = table[ids[t]]·scale for t < rows: the row
	// decoded exactly as Dequant does, each value times scale rounded to
	// f32 (MODEL_SPEC §3.1.4). ids holds row indices as float32 values.
	Embed(out Buf, table Weight, ids Buf, rows int, scale float32) error
	// SoftEmbed writes out[r] = (Σ_v p_r[v]·table[v])·scale for r < rows,
	// p_r = softmax(logits[r]) over the table's V = Rows rows (f32 exp of
	// x − max, the f32 sum's reciprocal times each), table [V][H] decoded
	// as Dequant does (MODEL_SPEC §3.9 step 2, the soft embedding).
	SoftEmbed(out, logits Buf, rows int, table Weight, scale float32) error
	// Attention is scaled-by-1 dot-product attention with grouped KV heads
	// (MODEL_SPEC §3.3): for query row t < a.Rows and head h < a.Heads,
	// out[t][h] = Σ_j softmax_j(q[t][h]·k[j][g]) v[j][g] over the visible
	// key rows j (AttentionShape), g = h / (Heads/KVHeads). q and out are
	// [Rows][Heads·HeadDim], k and v hold key rows of KVHeads·HeadDim. The
	// scores and the softmax are f32.
	Attention(out, q, k, v Buf, a AttentionShape) error
	// MoE is one layer's routed-experts branch (MODEL_SPEC §3.4, §3.5) for
	// rows tokens: the router on the raw residual x, the experts on the
	// normed input u, out[t] = Σ_j w_j·down_e(gelu(gate_e(u[t]))⊙up_e(u[t]))
	// summed over the top-k slots in order (MoEWeights).
	MoE(out, u, x Buf, rows int, w MoEWeights) error

	// Temper divides the first n values by T (TemperRow: one f32 division
	// each).
	Temper(x Buf, n int, T float32) error
	// RoundBF16 rounds the first n values to the nearest bfloat16 (ties to
	// even, NaN kept), stored as float32.
	RoundBF16(x Buf, n int) error
	// Categorical writes to out[r], for each row r < rows of v tempered
	// logits, the index drawn from softmax(row) with the uniform us[r] in
	// [0, 1): the first index whose cumulative weight exp(z − max) exceeds
	// us[r]·Σ weights (indices of weight 0 skipped; the last positive one
	// if none), as a float32 value (docs/sampler.md).
	Categorical(out, logits Buf, rows, v int, us []float64) error
}

// AttentionShape says which key rows each query of Attention sees. Key row
// j is the absolute position j of the sequence.
//
//   - Bidirectional (Causal false): every query sees rows KeyStart ≤ j <
//     KeyEnd.
//   - Causal: query t sits at position p = QueryPos + t and sees rows
//     lo ≤ j ≤ p, where lo is KeyStart, raised to p − Window + 1 when
//     Window > 0 (a sliding layer hides keys at or before p − W).
type AttentionShape struct {
	Rows, Heads, KVHeads, HeadDim int
	KeyStart, KeyEnd              int
	Causal                        bool
	QueryPos                      int
	Window                        int
}

// MoEWeights are one layer's router and experts for Backend.MoE.
//
// Router (MODEL_SPEC §3.4): r = RMSNorm(x[t]) unscaled, r_i = (r_i ·
// RouterScale[i])·RouterRoot, logits = r·Routerᵀ ([E]), p = softmax(logits)
// in f32; the TopK experts of largest p (ties to the lower index) in
// descending order; w_j = (p_j / f32(Σ_j p_j))·PerExpertScale[e_j].
//
// Experts (MODEL_SPEC §3.5): GateUp is [E·2F][H], expert e's gate rows
// e·2F…e·2F+F−1 followed by its F up rows; Down is [E·H][F], expert e's rows
// e·H…e·H+H−1. y_j = down_e(gelu(gate_e(u))·up_e(u)) and out[t] = Σ_j
// f32(y_j·w_j) summed in slot order in f32.
type MoEWeights struct {
	Router                      Weight
	RouterScale, PerExpertScale Buf
	RouterRoot, Eps             float32
	GateUp, Down                Weight
	TopK                        int
}

// Caps describes a backend.
type Caps struct {
	// Device names the hardware: "host" for the CPU backend, the GPU's name
	// otherwise.
	Device string
	// Host reports that buffers and weights live in host memory (the CPU
	// backend): UploadWeight keeps a reference to the tensor's bytes.
	Host bool
	// Memory is the device's memory in bytes (0: host memory).
	Memory uint64
	// Formats lists the stored formats UploadWeight accepts.
	Formats []codecs.Format
	// Resident lists the formats kept on the device in their stored bytes
	// (and decoded there); a weight of another accepted format is decoded
	// on the host at upload and kept as float32.
	Resident []codecs.Format
	// Kernels names, per op, the strategy the backend chose when it was
	// made (from its typed options and the device), as "dgq bench --json"
	// reports it; nil when the backend has one way per op.
	Kernels map[string]string
	// Numerics is what the backend's float32 arithmetic may do, as its
	// vendor documents it; the conformance suite's options and bounds follow
	// from it.
	Numerics Numerics
}

// Buf is a backend's buffer of float32 values.
type Buf interface {
	// Len is the buffer's size in float32 values.
	Len() int
	// Free releases it (after the work queued on it); it may be called
	// more than once.
	Free() error
}

// Weight is a stored tensor resident on a backend, seen as a [Rows, K]
// matrix.
type Weight interface {
	Rows() int
	Cols() int
	Format() codecs.Format
	DType() codecs.DType
	// Free releases it (after the work queued on it); it may be called
	// more than once.
	Free() error
}

// CheckRMSNorm validates RMSNorm's shapes for any backend: x and y hold
// rows·n values, w (when not nil) n.
func CheckRMSNorm(y, x, w Buf, rows, n int) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("backend: RMSNorm of %d×%d", rows, n)
	}
	if y == nil || x == nil {
		return fmt.Errorf("backend: RMSNorm: nil buffer")
	}
	if x.Len()/n < rows || y.Len()/n < rows {
		return fmt.Errorf("backend: RMSNorm of %d×%d: x holds %d values, y %d", rows, n, x.Len(), y.Len())
	}
	if w != nil && w.Len() < n {
		return fmt.Errorf("backend: RMSNorm of width %d: w holds %d values", n, w.Len())
	}
	return nil
}

// CheckMatMulNT validates MatMulNT's shapes for any backend.
func CheckMatMulNT(c, a Buf, w Weight, m int) error {
	if c == nil || a == nil || w == nil {
		return fmt.Errorf("backend: MatMulNT: nil operand")
	}
	if m < 0 {
		return fmt.Errorf("backend: MatMulNT of %d rows", m)
	}
	if c == a {
		return fmt.Errorf("backend: MatMulNT: c is a")
	}
	n, k := w.Rows(), w.Cols()
	if (k > 0 && a.Len()/k < m) || (n > 0 && c.Len()/n < m) {
		return fmt.Errorf("backend: MatMulNT of %d×%d·(%d×%d)ᵀ: a holds %d values, c %d", m, k, n, k, a.Len(), c.Len())
	}
	return nil
}

// CheckDequant validates Dequant's shapes for any backend.
func CheckDequant(out Buf, w Weight) error {
	if out == nil || w == nil {
		return fmt.Errorf("backend: Dequant: nil operand")
	}
	if w.Cols() > 0 && out.Len()/w.Cols() < w.Rows() {
		return fmt.Errorf("backend: Dequant of %d×%d into %d values", w.Rows(), w.Cols(), out.Len())
	}
	return nil
}

// CheckRoPE validates RoPE's shapes for any backend.
func CheckRoPE(x Buf, rows, heads, headDim, pos0 int, invFreq Buf) error {
	if x == nil || invFreq == nil {
		return fmt.Errorf("backend: RoPE: nil buffer")
	}
	if rows <= 0 || heads <= 0 || headDim <= 0 || headDim%2 != 0 {
		return fmt.Errorf("backend: RoPE of %d×%d×%d", rows, heads, headDim)
	}
	if invFreq.Len() < headDim/2 {
		return fmt.Errorf("backend: RoPE of head dim %d: %d inverse frequencies", headDim, invFreq.Len())
	}
	if pos0 < 0 || pos0+rows > 1<<24 {
		return fmt.Errorf("backend: RoPE at positions %d…%d", pos0, pos0+rows-1)
	}
	if x.Len()/(heads*headDim) < rows {
		return fmt.Errorf("backend: RoPE of %d×%d×%d: x holds %d values", rows, heads, headDim, x.Len())
	}
	return nil
}

// CheckSoftcap validates Softcap's arguments for any backend.
func CheckSoftcap(x Buf, n int, cap float32) error {
	if x == nil {
		return fmt.Errorf("backend: Softcap: nil buffer")
	}
	if n < 0 || n > x.Len() {
		return fmt.Errorf("backend: Softcap of %d values in %d", n, x.Len())
	}
	if !(cap > 0) || math.IsInf(float64(cap), 0) {
		return fmt.Errorf("backend: Softcap at %g", cap)
	}
	return nil
}

// CheckRowStats validates RowStats's arguments for any backend.
func CheckRowStats(logits Buf, rows, v int, temperature float32, entropy, argmax Buf) error {
	if logits == nil || entropy == nil || argmax == nil {
		return fmt.Errorf("backend: RowStats: nil buffer")
	}
	if rows <= 0 || v <= 0 || v > 1<<24 {
		return fmt.Errorf("backend: RowStats of %d×%d", rows, v)
	}
	if !(temperature > 0) || math.IsInf(float64(temperature), 0) {
		return fmt.Errorf("backend: RowStats at temperature %g", temperature)
	}
	if logits.Len()/v < rows || entropy.Len() < rows || argmax.Len() < rows {
		return fmt.Errorf("backend: RowStats of %d×%d: logits hold %d values, entropy %d, argmax %d", rows, v, logits.Len(), entropy.Len(), argmax.Len())
	}
	return nil
}
