package cuda

import (
	"fmt"
	"math"

	api "github.com/dgq-dev/dgq/runtime/backend"
)

// The backend's model-level ops (api.Backend): each checks its shapes
// with the runtime's Check function, then only queues work on the device's
// stream (kernels, device copies, cuBLAS). The exceptions: Categorical
// uploads its rows' uniforms (a few bytes, waiting for the stream), and a
// scratch buffer that must grow is reallocated (freeing the old one waits
// for the stream). Scratch comes from the backend's arena (arena.go).

// ptrs returns the device addresses of buffers of this backend.
func (c *backend) ptrs(bufs ...api.Buf) ([]Ptr, error) {
	p := make([]Ptr, len(bufs))
	for i, b := range bufs {
		cb, err := c.buf(b)
		if err != nil {
			return nil, err
		}
		p[i] = cb.b.Ptr()
	}
	return p, nil
}

// operands returns the device addresses of an op's buffers once its shape
// check passed: check, the result of its backend.Check function, is
// returned as it is when not nil.
func (c *backend) operands(check error, bufs ...api.Buf) ([]Ptr, error) {
	if check != nil {
		return nil, check
	}
	return c.ptrs(bufs...)
}

// weightOperands is operands for an op that also reads a weight.
func (c *backend) weightOperands(check error, w api.Weight, bufs ...api.Buf) (*cudaWeight, []Ptr, error) {
	p, err := c.operands(check, bufs...)
	if err != nil {
		return nil, nil, err
	}
	cw, err := c.weight(w)
	return cw, p, err
}

func (c *backend) Copy(dst api.Buf, dstOff int, src api.Buf, srcOff int, n int) error {
	p, err := c.operands(api.CheckCopy(dst, dstOff, src, srcOff, n), dst, src)
	if err != nil || n == 0 {
		return err
	}
	return c.copyF32(p[0].Add(4*int64(dstOff)), p[1].Add(4*int64(srcOff)), int64(n))
}

func (c *backend) AddScale(x, y api.Buf, n int, s float32) error {
	p, err := c.operands(api.CheckElementwise("AddScale", n, x, y), x, y)
	if err != nil {
		return err
	}
	return c.ops.AddScale(p[0], p[1], int64(n), s)
}

func (c *backend) GeluMul(g, u api.Buf, n int) error {
	p, err := c.operands(api.CheckElementwise("GeluMul", n, g, u), g, u)
	if err != nil {
		return err
	}
	return c.ops.GeluMul(p[0], p[1], int64(n))
}

func (c *backend) Temper(x api.Buf, n int, T float32) error {
	p, err := c.operands(api.CheckTemper(x, n, T), x)
	if err != nil {
		return err
	}
	return c.ops.Temper(p[0], int64(n), T)
}

func (c *backend) RoundBF16(x api.Buf, n int) error {
	p, err := c.operands(api.CheckElementwise("RoundBF16", n, x), x)
	if err != nil {
		return err
	}
	return c.ops.RoundBF16(p[0], int64(n))
}

// Embed gathers the rows on the device (Ops.Embed). The CPU refuses an id
// that is not an integer in [0, Rows); here such an id, which the device
// cannot report without a synchronization, gives a row of NaN.
func (c *backend) Embed(out api.Buf, table api.Weight, ids api.Buf, rows int, scale float32) error {
	tw, p, err := c.weightOperands(api.CheckEmbed(out, table, ids, rows), table, out, ids)
	if err != nil {
		return err
	}
	f, dt := tw.resident()
	return c.ops.Embed(p[0], p[1], tw.b.Ptr(), f, dt, tw.geom, rows, scale)
}

// SoftEmbed's scratch bounds, in f32 values: the probabilities of at most
// softProbs/V rows at a time (256 MiB: the 256 rows of a canvas over a
// 262144-token vocabulary in one pass), and bands of at most softBand/H
// decoded table rows (64 MiB).
const (
	softProbs = 1 << 26
	softBand  = 1 << 24
)

// SoftEmbed computes, for each chunk of rows, P = softmax(logits) into
// scratch (Ops.Softmax), then out = P·table with f32 SGEMMs over bands of
// the table decoded into scratch (Ops.DequantRows; raw f32 in place), the
// first band with β = 0 and the others accumulated with β = 1, then
// multiplies by scale.
func (c *backend) SoftEmbed(out, logits api.Buf, rows int, table api.Weight, scale float32) error {
	tw, p, err := c.weightOperands(api.CheckSoftEmbed(out, logits, rows, table), table, out, logits)
	if err != nil {
		return err
	}
	V, H := tw.Rows(), tw.Cols()
	if H == 0 {
		return nil
	}
	if V > math.MaxInt32 || H > math.MaxInt32 {
		return fmt.Errorf("cuda: SoftEmbed over a %d×%d table", V, H)
	}
	chunk := max(1, min(rows, softProbs/V))
	nb := max(1, min(V, softBand/H))
	probs, err := c.scratch.get(scrSoftProbs, 4*int64(chunk)*int64(V))
	if err != nil {
		return err
	}
	var band *Buffer
	if !tw.f32 {
		if band, err = c.scratch.get(scrSoftBand, 4*int64(nb)*int64(H)); err != nil {
			return err
		}
	}
	for r0 := 0; r0 < rows; r0 += chunk {
		n := min(chunk, rows-r0)
		if err := c.ops.Softmax(probs.Ptr(), p[1].Add(4*int64(r0)*int64(V)), n, V); err != nil {
			return err
		}
		// Row-major out[n][H] = P[n][V]·T[V][H] is, column-major,
		// outᵀ (H×n) = Tᵀ (H×V, T's rows as columns, ld H) · Pᵀ (V×n, ld V).
		o := p[0].Add(4 * int64(r0) * int64(H))
		if handled, err := c.softEmbedFast(o, probs.Ptr(), n, V, H, tw); handled {
			if err != nil {
				return err
			}
			continue
		}
		if tw.f32 {
			if err := c.d.Sgemm(false, false, H, n, V, 1, tw.b.Ptr(), H, probs.Ptr(), V, 0, o, H); err != nil {
				return err
			}
			continue
		}
		for v0 := 0; v0 < V; v0 += nb {
			k := min(nb, V-v0)
			if err := c.ops.DequantRows(band.Ptr(), tw.b.Ptr(), tw.f, tw.dt, tw.geom, int64(v0), int64(k)); err != nil {
				return err
			}
			beta := float32(1)
			if v0 == 0 {
				beta = 0
			}
			if err := c.d.Sgemm(false, false, H, n, k, 1, band.Ptr(), H, probs.Ptr().Add(4*int64(v0)), V, beta, o, H); err != nil {
				return err
			}
		}
	}
	if scale == 1 {
		return nil // x·1 is x
	}
	return c.ops.Scale(p[0], int64(rows)*int64(H), scale)
}

func (c *backend) Attention(out, q, k, v api.Buf, a api.AttentionShape) error {
	p, err := c.operands(api.CheckAttention(out, q, k, v, a), out, q, k, v)
	if err != nil {
		return err
	}
	if c.k.attnGEMM {
		return c.attentionGEMM(p[0], p[1], p[2], p[3], a)
	}
	s, err := c.scratch.ptr(scrAttn, AttentionScratch(a))
	if err != nil {
		return err
	}
	return c.ops.Attention(p[0], p[1], p[2], p[3], s, a)
}

// oneBelow is the largest float32 below 1.
var oneBelow = math.Float32frombits(0x3f7fffff)

// Categorical uploads the rows' uniforms as f32 (u rounded to the nearest
// f32, at most the largest below 1) and draws on the device
// (Ops.Categorical): compensated f32 sums where the CPU sums in float64, so
// a draw differs from the CPU's only where u·Σw lies within ~1e-6 (relative)
// of a cumulative weight.
func (c *backend) Categorical(out, logits api.Buf, rows, v int, us []float64) error {
	p, err := c.operands(api.CheckCategorical(out, logits, rows, v, us), out, logits)
	if err != nil {
		return err
	}
	u := make([]float32, rows)
	for i, x := range us[:rows] {
		u[i] = min(float32(x), oneBelow)
	}
	ub, err := c.scratch.get(scrUniform, 4*int64(rows))
	if err != nil {
		return err
	}
	if err := ub.Upload(Bytes(u)); err != nil {
		return err
	}
	return c.ops.Categorical(p[0], p[1], ub.Ptr(), rows, v)
}
