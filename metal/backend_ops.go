package metal

import (
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// The backend's model-level ops: each checks its shapes with the runtime's
// Check function, then only queues launches on the engine. The exceptions:
// Categorical copies its rows' uniforms into engine memory (after the queued
// work, as Upload does), and recorded routes (RecordRoutes) are read back.

// operands returns the buffers of an op once its shape check passed: check,
// the result of its backend.Check function, is returned as it is when not
// nil.
func (b *metalBackend) operands(check error, bufs ...backend.Buf) ([]*metalBuf, error) {
	if check != nil {
		return nil, check
	}
	if err := b.live(); err != nil {
		return nil, err
	}
	out := make([]*metalBuf, len(bufs))
	for i, v := range bufs {
		mb, err := b.buf(v)
		if err != nil {
			return nil, err
		}
		out[i] = mb
	}
	return out, nil
}

// weightOperands is operands for an op that also reads a weight.
func (b *metalBackend) weightOperands(check error, w backend.Weight, bufs ...backend.Buf) (*metalWeight, []*metalBuf, error) {
	p, err := b.operands(check, bufs...)
	if err != nil {
		return nil, nil, err
	}
	mw, err := b.weight(w)
	return mw, p, err
}

// RMSNorm: rmsnorm.kern, one group per row (up to rowThreads threads, as
// the row needs).
func (b *metalBackend) RMSNorm(y, x, w backend.Buf, rows, n int, eps float32) error {
	bufs := []backend.Buf{y, x}
	if w != nil {
		bufs = append(bufs, w)
	}
	p, err := b.operands(backend.CheckRMSNorm(y, x, w, rows, n), bufs...)
	if err != nil {
		return err
	}
	nn, err := u32Of(int64(n), "RMSNorm width")
	if err != nil {
		return err
	}
	groups, threads := [3]int{rows}, [3]int{fitThreads(n, rowThreads)}
	if w == nil {
		return b.launch("rmsnorm.kern", "rmsnorm_unscaled_f32", groups, threads, bufArg(p[1], 0), bufArg(p[0], 0), u32Arg(nn), f32Arg(eps))
	}
	return b.launch("rmsnorm.kern", "rmsnorm_f32", groups, threads, bufArg(p[1], 0), bufArg(p[2], 0), bufArg(p[0], 0), u32Arg(nn), f32Arg(eps))
}

// Dequant: dequant.kern's whole-tensor decoders (bit-exact).
func (b *metalBackend) Dequant(out backend.Buf, w backend.Weight) error {
	mw, p, err := b.weightOperands(backend.CheckDequant(out, w), w, out)
	if err != nil {
		return err
	}
	return b.dequant(bufArg(p[0], 0), mw)
}

// MatMulNT: gemm.metal (c = a·wᵀ) over the weight in its stored format; a
// reduction over K = 0 fills c with zeros.
func (b *metalBackend) MatMulNT(c, a backend.Buf, w backend.Weight, m int) error {
	mw, p, err := b.weightOperands(backend.CheckMatMulNT(c, a, w, m), w, c, a)
	if err != nil {
		return err
	}
	n, k := mw.Rows(), mw.Cols()
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		return b.fillZero(bufArg(p[0], 0), int64(m)*int64(n))
	}
	return b.gemm(bufArg(p[0], 0), bufArg(p[1], 0), mw, m, n, k, true)
}

// gemm queues gemm_f32: c [m][n] = a [m][k] times w (nt: w is [n][k] and c =
// a·wᵀ; else w is [k][n] and c = a·w), k ≥ 1.
func (b *metalBackend) gemm(c, a Arg, w *metalWeight, m, n, k int, nt bool) error {
	mm, err := u32Of(int64(m), "product rows")
	if err != nil {
		return err
	}
	if _, err := u32Of(int64(n)+gemmTile, "product columns"); err != nil {
		return err
	}
	flag := uint32(0)
	if nt {
		flag = 1
	}
	pl, code, bits, matRows := w.decodeArgs()
	groups := [3]int{(n + gemmTile - 1) / gemmTile, (m + gemmTile - 1) / gemmTile}
	return b.launch("gemm.metal", "gemm_f32", groups, [3]int{gemmThreads}, a, pl[0], pl[1], pl[2], c,
		u32Arg(mm), u32Arg(uint32(n)), u32Arg(uint32(k)), code, bits, matRows, u32Arg(flag))
}

// fillZero queues n f32 zeros at dst.
func (b *metalBackend) fillZero(dst Arg, n int64) error {
	return b.stride("copy.metal", "fill_u32", n, dst, u32Arg(0), u64Arg(uint64(n)))
}

// RoPE: rope.kern's rope_f32, one group per (row, head) vector.
func (b *metalBackend) RoPE(x backend.Buf, rows, heads, headDim, pos0 int, invFreq backend.Buf) error {
	p, err := b.operands(backend.CheckRoPE(x, rows, heads, headDim, pos0, invFreq), x, invFreq)
	if err != nil {
		return err
	}
	if headDim > 1<<30 || heads > 1<<30 || rows > 1<<24 {
		return fmt.Errorf("%w: metal: RoPE of %d×%d×%d", ErrArgument, rows, heads, headDim)
	}
	threads := min(max((headDim/2+31)/32*32, 32), 256)
	groups := int(min(int64(rows)*int64(heads), 1<<24)) // the kernel strides over the rest
	return b.launch("rope.kern", "rope_f32", [3]int{groups}, [3]int{threads}, bufArg(p[0], 0), bufArg(p[1], 0),
		u32Arg(uint32(rows)), u32Arg(uint32(heads)), u32Arg(uint32(headDim)), u32Arg(uint32(pos0)))
}

// Softcap: rope.kern's softcap_f32.
func (b *metalBackend) Softcap(x backend.Buf, n int, cp float32) error {
	p, err := b.operands(backend.CheckSoftcap(x, n, cp), x)
	if err != nil {
		return err
	}
	return b.stride("rope.kern", "softcap_f32", int64(n), bufArg(p[0], 0), u64Arg(uint64(n)), f32Arg(cp))
}

// RowStats: rope.kern's row_stats_f32, one group per row.
func (b *metalBackend) RowStats(logits backend.Buf, rows, v int, temperature float32, entropy, argmax backend.Buf) error {
	p, err := b.operands(backend.CheckRowStats(logits, rows, v, temperature, entropy, argmax), logits, entropy, argmax)
	if err != nil {
		return err
	}
	return b.perRow("rope.kern", "row_stats_f32", rows, v, bufArg(p[0], 0), bufArg(p[1], 0), bufArg(p[2], 0),
		u32Arg(uint32(v)), f32Arg(temperature))
}

// Copy: copy.metal's copy_u32, the words moved as integers.
func (b *metalBackend) Copy(dst backend.Buf, dstOff int, src backend.Buf, srcOff int, n int) error {
	p, err := b.operands(backend.CheckCopy(dst, dstOff, src, srcOff, n), dst, src)
	if err != nil || n == 0 {
		return err
	}
	return b.stride("copy.metal", "copy_u32", int64(n), bufArg(p[0], dstOff), bufArg(p[1], srcOff), u64Arg(uint64(n)))
}

// AddScale: elementwise.kern's add_scale_f32 (bit-exact).
func (b *metalBackend) AddScale(x, y backend.Buf, n int, s float32) error {
	p, err := b.operands(backend.CheckElementwise("AddScale", n, x, y), x, y)
	if err != nil {
		return err
	}
	return b.stride("elementwise.kern", "add_scale_f32", int64(n), bufArg(p[0], 0), bufArg(p[1], 0), u64Arg(uint64(n)), f32Arg(s))
}

// GeluMul: elementwise.kern's gelu_mul_f32.
func (b *metalBackend) GeluMul(g, u backend.Buf, n int) error {
	p, err := b.operands(backend.CheckElementwise("GeluMul", n, g, u), g, u)
	if err != nil {
		return err
	}
	return b.stride("elementwise.kern", "gelu_mul_f32", int64(n), bufArg(p[0], 0), bufArg(p[1], 0), u64Arg(uint64(n)))
}

// Temper: elementwise.kern's temper_f32 (one IEEE division each).
func (b *metalBackend) Temper(x backend.Buf, n int, T float32) error {
	p, err := b.operands(backend.CheckTemper(x, n, T), x)
	if err != nil {
		return err
	}
	return b.stride("elementwise.kern", "temper_f32", int64(n), bufArg(p[0], 0), u64Arg(uint64(n)), f32Arg(T))
}

// RoundBF16: elementwise.kern's round_bf16_f32.
func (b *metalBackend) RoundBF16(x backend.Buf, n int) error {
	p, err := b.operands(backend.CheckElementwise("RoundBF16", n, x), x)
	if err != nil {
		return err
	}
	return b.stride("elementwise.kern", "round_bf16_f32", int64(n), bufArg(p[0], 0), u64Arg(uint64(n)))
}

// Embed gathers the rows with dequant.kern's embed_f32 (the decoders of
// Dequant, times scale). The CPU refuses an id that is not an integer in
// [0, Rows); here such an id, which the engine cannot report without a
// synchronization, gives a row of NaN.
func (b *metalBackend) Embed(out backend.Buf, table backend.Weight, ids backend.Buf, rows int, scale float32) error {
	tw, p, err := b.weightOperands(backend.CheckEmbed(out, table, ids, rows), table, out, ids)
	if err != nil {
		return err
	}
	total := int64(rows) * int64(tw.Cols())
	pl, code, bits, matRows := tw.decodeArgs()
	return b.stride("dequant.kern", "embed_f32", total, pl[0], pl[1], pl[2], bufArg(p[1], 0), bufArg(p[0], 0), code, bits,
		u32Arg(uint32(tw.Rows())), u32Arg(uint32(tw.Cols())), u32Arg(uint32(rows)), f32Arg(scale), matRows)
}

// softProbs bounds SoftEmbed's probabilities scratch in f32 values: at most
// softProbs/V rows at a time (256 MiB: the 256 rows of a canvas over a
// 262144-token vocabulary in one pass).
const softProbs = 1 << 26

// SoftEmbed computes, per chunk of rows, P = softmax(logits) into scratch
// (attention.kern's softmax_f32), then out = P·table with gemm.metal over
// the table in its stored format, then multiplies by scale.
func (b *metalBackend) SoftEmbed(out, logits backend.Buf, rows int, table backend.Weight, scale float32) error {
	tw, p, err := b.weightOperands(backend.CheckSoftEmbed(out, logits, rows, table), table, out, logits)
	if err != nil {
		return err
	}
	V, H := tw.Rows(), tw.Cols()
	if H == 0 {
		return nil
	}
	if V > math.MaxInt32 || H > math.MaxInt32 {
		return fmt.Errorf("%w: metal: SoftEmbed over a %d×%d table", ErrArgument, V, H)
	}
	chunk := max(1, min(rows, softProbs/V))
	probs, err := b.scratchMem(scrProbs, 4*int64(chunk)*int64(V))
	if err != nil {
		return err
	}
	for r0 := 0; r0 < rows; r0 += chunk {
		n := min(chunk, rows-r0)
		if err := b.perRow("attention.kern", "softmax_f32", min(n, 1<<20), V, bufArg(p[1], r0*V), memArg(probs, 0),
			u32Arg(uint32(n)), u32Arg(uint32(V))); err != nil {
			return err
		}
		if err := b.gemm(bufArg(p[0], r0*H), memArg(probs, 0), tw, n, H, V, false); err != nil {
			return err
		}
	}
	if scale == 1 {
		return nil // x·1 is x
	}
	total := int64(rows) * int64(H)
	return b.stride("elementwise.kern", "scale_f32", total, bufArg(p[0], 0), u64Arg(uint64(total)), f32Arg(scale))
}

// oneBelow is the largest float32 below 1.
var oneBelow = math.Float32frombits(0x3f7fffff)

// catThreads is categorical_f32's group size: the draw depends on it (and
// on nothing else of the launch).
const catThreads = 256

// Categorical copies the rows' uniforms into scratch as f32 (u rounded to
// the nearest f32, at most the largest below 1) once the queued work is done,
// and draws with sampler.kern's categorical_f32, one group per row.
func (b *metalBackend) Categorical(out, logits backend.Buf, rows, v int, us []float64) error {
	p, err := b.operands(backend.CheckCategorical(out, logits, rows, v, us), out, logits)
	if err != nil {
		return err
	}
	if err := b.e.Sync(); err != nil { // queued work may still read the uniforms' scratch
		return fmt.Errorf("metal: Categorical: %w", err)
	}
	ub, err := b.scratchMem(scrUniform, 4*int64(rows))
	if err != nil {
		return err
	}
	u := floats(ub, rows)
	for i, x := range us[:rows] {
		u[i] = min(float32(x), oneBelow)
	}
	return b.launch("sampler.kern", "categorical_f32", [3]int{min(rows, 1<<20)}, [3]int{catThreads},
		bufArg(p[1], 0), memArg(ub, 0), bufArg(p[0], 0), u32Arg(uint32(rows)), u32Arg(uint32(v)))
}
