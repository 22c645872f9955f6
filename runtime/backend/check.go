package backend

import (
	"fmt"
	"math"
)

// Shape checks of the Backend ops that every backend runs before queueing
// work, so a bad call is refused the same way everywhere.

// checkBufs fails when a buffer is nil.
func checkBufs(op string, bufs ...Buf) error {
	for _, b := range bufs {
		if b == nil {
			return fmt.Errorf("backend: %s: nil buffer", op)
		}
	}
	return nil
}

// checkLen fails when b holds fewer than n values.
func checkLen(op, what string, b Buf, n int) error {
	if n < 0 || b.Len() < n {
		return fmt.Errorf("backend: %s: %s holds %d values, want %d", op, what, b.Len(), n)
	}
	return nil
}

// CheckCopy validates Copy's arguments for any backend.
func CheckCopy(dst Buf, dstOff int, src Buf, srcOff int, n int) error {
	if err := checkBufs("Copy", dst, src); err != nil {
		return err
	}
	if n < 0 || dstOff < 0 || srcOff < 0 || dstOff > dst.Len()-n || srcOff > src.Len()-n {
		return fmt.Errorf("backend: Copy of %d values from %d of %d to %d of %d", n, srcOff, src.Len(), dstOff, dst.Len())
	}
	if dst == src && n > 0 && dstOff < srcOff+n && srcOff < dstOff+n {
		return fmt.Errorf("backend: Copy of %d overlapping values within one buffer", n)
	}
	return nil
}

// CheckElementwise validates AddScale, GeluMul, Temper and RoundBF16: n
// values of each buffer.
func CheckElementwise(op string, n int, bufs ...Buf) error {
	if err := checkBufs(op, bufs...); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("backend: %s of %d values", op, n)
	}
	for _, b := range bufs {
		if err := checkLen(op, "a buffer", b, n); err != nil {
			return err
		}
	}
	return nil
}

// CheckTemper validates Temper's arguments for any backend.
func CheckTemper(x Buf, n int, T float32) error {
	if !(T > 0) || math.IsInf(float64(T), 0) {
		return fmt.Errorf("backend: Temper at temperature %g", T)
	}
	return CheckElementwise("Temper", n, x)
}

// CheckEmbed validates Embed's arguments for any backend.
func CheckEmbed(out Buf, table Weight, ids Buf, rows int) error {
	if err := checkBufs("Embed", out, ids); err != nil {
		return err
	}
	if table == nil {
		return fmt.Errorf("backend: Embed: nil table")
	}
	if rows <= 0 || table.Rows() <= 0 || table.Rows() > 1<<24 {
		return fmt.Errorf("backend: Embed of %d rows from a %d-row table", rows, table.Rows())
	}
	if err := checkLen("Embed", "ids", ids, rows); err != nil {
		return err
	}
	return checkLen("Embed", "out", out, rows*table.Cols())
}

// CheckSoftEmbed validates SoftEmbed's arguments for any backend.
func CheckSoftEmbed(out, logits Buf, rows int, table Weight) error {
	if err := checkBufs("SoftEmbed", out, logits); err != nil {
		return err
	}
	if table == nil {
		return fmt.Errorf("backend: SoftEmbed: nil table")
	}
	if rows <= 0 || table.Rows() <= 0 {
		return fmt.Errorf("backend: SoftEmbed of %d rows over a %d-row table", rows, table.Rows())
	}
	if err := checkLen("SoftEmbed", "logits", logits, rows*table.Rows()); err != nil {
		return err
	}
	return checkLen("SoftEmbed", "out", out, rows*table.Cols())
}

// CheckAttention validates Attention's arguments for any backend: k and v
// must hold every key row a query may see.
func CheckAttention(out, q, k, v Buf, a AttentionShape) error {
	if err := checkBufs("Attention", out, q, k, v); err != nil {
		return err
	}
	if a.Rows <= 0 || a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("backend: Attention of %d rows, %d heads over %d KV heads of %d", a.Rows, a.Heads, a.KVHeads, a.HeadDim)
	}
	end := a.KeyEnd
	if a.Causal {
		end = a.QueryPos + a.Rows
		if a.QueryPos < 0 || a.Window < 0 {
			return fmt.Errorf("backend: causal Attention at position %d, window %d", a.QueryPos, a.Window)
		}
	}
	if a.KeyStart < 0 || a.KeyStart >= end {
		return fmt.Errorf("backend: Attention over key rows %d…%d", a.KeyStart, end-1)
	}
	if a.Causal && a.KeyStart > a.QueryPos {
		return fmt.Errorf("backend: causal Attention: the first query at %d sees no key from %d", a.QueryPos, a.KeyStart)
	}
	qw, kw := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	for _, c := range []struct {
		what string
		b    Buf
		n    int
	}{{"q", q, a.Rows * qw}, {"out", out, a.Rows * qw}, {"k", k, end * kw}, {"v", v, end * kw}} {
		if err := checkLen("Attention", c.what, c.b, c.n); err != nil {
			return err
		}
	}
	if out == q || out == k || out == v {
		return fmt.Errorf("backend: Attention: out aliases an input")
	}
	return nil
}

// CheckMoE validates MoE's arguments for any backend and returns E, H and F.
func CheckMoE(out, u, x Buf, rows int, w MoEWeights) (e, h, f int, err error) {
	if err := checkBufs("MoE", out, u, x, w.RouterScale, w.PerExpertScale); err != nil {
		return 0, 0, 0, err
	}
	if w.Router == nil || w.GateUp == nil || w.Down == nil {
		return 0, 0, 0, fmt.Errorf("backend: MoE: nil weight")
	}
	e, h = w.Router.Rows(), w.Router.Cols()
	f = w.Down.Cols()
	switch {
	case rows <= 0 || e <= 0 || h <= 0 || f <= 0:
		return 0, 0, 0, fmt.Errorf("backend: MoE of %d rows, %d experts, width %d, expert width %d", rows, e, h, f)
	case w.TopK <= 0 || w.TopK > e:
		return 0, 0, 0, fmt.Errorf("backend: MoE top-%d of %d experts", w.TopK, e)
	case w.GateUp.Rows() != e*2*f || w.GateUp.Cols() != h:
		return 0, 0, 0, fmt.Errorf("backend: MoE gate_up is %d×%d, want %d×%d", w.GateUp.Rows(), w.GateUp.Cols(), e*2*f, h)
	case w.Down.Rows() != e*h:
		return 0, 0, 0, fmt.Errorf("backend: MoE down is %d×%d, want %d×%d", w.Down.Rows(), w.Down.Cols(), e*h, f)
	case out == u || out == x:
		return 0, 0, 0, fmt.Errorf("backend: MoE: out aliases an input")
	}
	for _, c := range []struct {
		what string
		b    Buf
		n    int
	}{{"out", out, rows * h}, {"u", u, rows * h}, {"x", x, rows * h}, {"router scale", w.RouterScale, h}, {"per-expert scale", w.PerExpertScale, e}} {
		if err := checkLen("MoE", c.what, c.b, c.n); err != nil {
			return 0, 0, 0, err
		}
	}
	return e, h, f, nil
}

// CheckCategorical validates Categorical's arguments for any backend.
func CheckCategorical(out, logits Buf, rows, v int, us []float64) error {
	if err := checkBufs("Categorical", out, logits); err != nil {
		return err
	}
	if rows <= 0 || v <= 0 || v > 1<<24 || len(us) < rows {
		return fmt.Errorf("backend: Categorical of %d×%d with %d uniforms", rows, v, len(us))
	}
	for _, u := range us[:rows] {
		if !(u >= 0 && u < 1) {
			return fmt.Errorf("backend: Categorical with uniform %g outside [0, 1)", u)
		}
	}
	if err := checkLen("Categorical", "logits", logits, rows*v); err != nil {
		return err
	}
	return checkLen("Categorical", "out", out, rows)
}
