package cpu

import (
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// The CPU backend's element-wise, embedding, attention, MoE and sampler
// ops.

func (c *Backend) bufs(bs ...backend.Buf) ([][]float32, error) {
	out := make([][]float32, len(bs))
	for i, b := range bs {
		v, err := cpuBufOf(b)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (c *Backend) Copy(dst backend.Buf, dstOff int, src backend.Buf, srcOff int, n int) error {
	if err := backend.CheckCopy(dst, dstOff, src, srcOff, n); err != nil {
		return err
	}
	v, err := c.bufs(dst, src)
	if err != nil {
		return err
	}
	copy(v[0][dstOff:dstOff+n], v[1][srcOff:srcOff+n])
	return nil
}

func (c *Backend) AddScale(x, y backend.Buf, n int, s float32) error {
	if err := backend.CheckElementwise("AddScale", n, x, y); err != nil {
		return err
	}
	v, err := c.bufs(x, y)
	if err != nil {
		return err
	}
	xv, yv := v[0][:n], v[1][:n]
	for i := range xv {
		xv[i] = (xv[i] + yv[i]) * s
	}
	return nil
}

func (c *Backend) GeluMul(g, u backend.Buf, n int) error {
	if err := backend.CheckElementwise("GeluMul", n, g, u); err != nil {
		return err
	}
	v, err := c.bufs(g, u)
	if err != nil {
		return err
	}
	geluMul(v[0][:n], v[1][:n], v[0][:n])
	return nil
}

func (c *Backend) Temper(x backend.Buf, n int, T float32) error {
	if err := backend.CheckTemper(x, n, T); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	TemperRow(xv[:n], T, xv[:n])
	return nil
}

func (c *Backend) RoundBF16(x backend.Buf, n int) error {
	if err := backend.CheckElementwise("RoundBF16", n, x); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	for i, z := range xv[:n] {
		xv[i] = RoundBF16(z)
	}
	return nil
}

func (c *Backend) Embed(out backend.Buf, table backend.Weight, ids backend.Buf, rows int, scale float32) error {
	if err := backend.CheckEmbed(out, table, ids, rows); err != nil {
		return err
	}
	v, err := c.bufs(out, ids)
	if err != nil {
		return err
	}
	e, err := cpuWeightOf(table)
	if err != nil {
		return err
	}
	H := e.cols()
	for t, f := range v[1][:rows] {
		id := int(f)
		if float32(id) != f || id < 0 || id >= e.rows() {
			return fmt.Errorf("cpu: Embed: id %g at row %d is outside [0, %d)", f, t, e.rows())
		}
		row := v[0][t*H : (t+1)*H]
		e.decode(id, 1, row)
		for i := range row {
			row[i] *= scale
		}
	}
	return nil
}

func (c *Backend) SoftEmbed(out, logits backend.Buf, rows int, table backend.Weight, scale float32) error {
	if err := backend.CheckSoftEmbed(out, logits, rows, table); err != nil {
		return err
	}
	v, err := c.bufs(out, logits)
	if err != nil {
		return err
	}
	e, err := cpuWeightOf(table)
	if err != nil {
		return err
	}
	soft := c.p.softEmbed(e, v[1][:rows*e.rows()], rows)
	if err := c.interrupted("SoftEmbed"); err != nil {
		return err
	}
	for i, s := range soft {
		v[0][i] = s * scale
	}
	return nil
}

func (c *Backend) Attention(out, q, k, v backend.Buf, a backend.AttentionShape) error {
	if err := backend.CheckAttention(out, q, k, v, a); err != nil {
		return err
	}
	b, err := c.bufs(out, q, k, v)
	if err != nil {
		return err
	}
	c.p.attend(b[0], b[1], b[2], b[3], a)
	return c.interrupted("Attention")
}

func (c *Backend) MoE(out, u, x backend.Buf, rows int, w backend.MoEWeights) error {
	E, H, F, err := backend.CheckMoE(out, u, x, rows, w)
	if err != nil {
		return err
	}
	b, err := c.bufs(out, u, x, w.RouterScale, w.PerExpertScale)
	if err != nil {
		return err
	}
	var mats [3]*matrix
	for i, wt := range []backend.Weight{w.Router, w.GateUp, w.Down} {
		if mats[i], err = cpuWeightOf(wt); err != nil {
			return err
		}
	}
	l := &moeLayer{H: H, E: E, K: w.TopK, F: F, eps: w.Eps, routerRoot: w.RouterRoot,
		router: mats[0], gateUp: mats[1], expDown: mats[2], routerScale: b[3][:H], perExpertScale: b[4][:E]}
	var gaps []float64 // the selection margins, recorded with the routes
	if c.routes != nil {
		gaps = make([]float64, rows)
		for t := range gaps {
			gaps[t] = math.Inf(1)
		}
	}
	idx, wts := c.p.route(l, b[2][:rows*H], rows, gaps)
	if err := c.interrupted("MoE"); err != nil {
		return err // the routes of a stopped router product are not recorded
	}
	c.recordRoutes(idx, rows, w.TopK, gaps) // RecordRoutes (routes.go): an optional diagnostic output
	y := c.p.experts(l, b[1][:rows*H], rows, idx, wts)
	if err := c.interrupted("MoE"); err != nil {
		return err
	}
	copy(b[0], y)
	return nil
}

func (c *Backend) Categorical(out, logits backend.Buf, rows, v int, us []float64) error {
	if err := backend.CheckCategorical(out, logits, rows, v, us); err != nil {
		return err
	}
	b, err := c.bufs(out, logits)
	if err != nil {
		return err
	}
	for r := range rows {
		if c.p.stopped() {
			return c.interrupted("Categorical")
		}
		b[0][r] = float32(Categorical(b[1][r*v:(r+1)*v], us[r]))
	}
	return nil
}
