package runtime

// The CPU backend's model-level ops: each runs the CPU runtime's own code
// (Model.route, Model.experts, Model.softEmbed, the attention arithmetic of
// attention.go) so the conformance suite compares other backends with
// exactly what Model computes.

func (c *cpuBackend) bufs(bs ...Buf) ([][]float32, error) {
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

func (c *cpuBackend) Copy(dst Buf, dstOff int, src Buf, srcOff int, n int) error {
	if err := CheckCopy(dst, dstOff, src, srcOff, n); err != nil {
		return err
	}
	v, err := c.bufs(dst, src)
	if err != nil {
		return err
	}
	copy(v[0][dstOff:dstOff+n], v[1][srcOff:srcOff+n])
	return nil
}

func (c *cpuBackend) AddScale(x, y Buf, n int, s float32) error {
	if err := CheckElementwise("AddScale", n, x, y); err != nil {
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

func (c *cpuBackend) GeluMul(g, u Buf, n int) error {
	if err := CheckElementwise("GeluMul", n, g, u); err != nil {
		return err
	}
	v, err := c.bufs(g, u)
	if err != nil {
		return err
	}
	geluMul(v[0][:n], v[1][:n], v[0][:n])
	return nil
}

func (c *cpuBackend) Temper(x Buf, n int, T float32) error {
	if err := CheckTemper(x, n, T); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	TemperRow(xv[:n], T, xv[:n])
	return nil
}

func (c *cpuBackend) RoundBF16(x Buf, n int) error {
	if err := CheckElementwise("RoundBF16", n, x); err != nil {
		return err
	}
	xv, err := cpuBufOf(x)
	if err != nil {
		return err
	}
	for i, z := range xv[:n] {
		xv[i] = sampRoundBF16(z)
	}
	return nil
}

func (c *cpuBackend) Embed(out Buf, table Weight, ids Buf, rows int, scale float32) error {
	if err := CheckEmbed(out, table, ids, rows); err != nil {
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
			return inputErr("Embed: id %g at row %d is outside [0, %d)", f, t, e.rows())
		}
		row := v[0][t*H : (t+1)*H]
		e.decode(id, 1, row)
		for i := range row {
			row[i] *= scale
		}
	}
	return nil
}

// cpuModel returns a Model that holds only the given shapes and the
// backend's worker machinery, for running Model's methods on buffers.
func (c *cpuBackend) cpuModel(h, v int) *Model {
	m := &Model{workers: c.m.workers, hidden: h, vocab: v}
	m.scratch.New = func() any { return new(scratch) }
	return m
}

func (c *cpuBackend) SoftEmbed(out, logits Buf, rows int, table Weight, scale float32) error {
	if err := CheckSoftEmbed(out, logits, rows, table); err != nil {
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
	m := c.cpuModel(e.cols(), e.rows())
	m.embed = e
	soft := m.softEmbed(v[1][:rows*e.rows()], rows)
	for i, s := range soft {
		v[0][i] = s * scale
	}
	return nil
}

func (c *cpuBackend) Attention(out, q, k, v Buf, a AttentionShape) error {
	if err := CheckAttention(out, q, k, v, a); err != nil {
		return err
	}
	b, err := c.bufs(out, q, k, v)
	if err != nil {
		return err
	}
	c.m.attend(b[0], b[1], b[2], b[3], a)
	return nil
}

// attend is Attention on host slices with the CPU runtime's arithmetic:
// each score the float64 dot product rounded to f32, softmax in f32, the
// weighted sum of values in float64 rounded once.
func (m *Model) attend(out, q, k, v []float32, a AttentionShape) {
	nq, hd := a.Heads, a.HeadDim
	qw, kw := nq*hd, a.KVHeads*hd
	group := nq / a.KVHeads
	span := a.KeyEnd - a.KeyStart
	if a.Causal {
		span = a.QueryPos + a.Rows - a.KeyStart
	}
	m.parallelCost(a.Rows*nq, a.Rows*nq*span*hd*2, func(s *scratch, item int) {
		t, h := item/nq, item%nq
		lo, hi := a.KeyStart, a.KeyEnd
		if a.Causal {
			p := a.QueryPos + t
			hi = p + 1
			if a.Window > 0 {
				lo = max(lo, p-a.Window+1)
			}
		}
		s.vec2 = grow64(s.vec2, 2*hd)
		q64, acc := s.vec2[:hd], s.vec2[hd:2*hd]
		for d, x := range q[t*qw+h*hd : t*qw+(h+1)*hd] {
			q64[d] = float64(x)
		}
		g := (h / group) * hd
		s.vec = grow32(s.vec, hi-lo)
		scores := s.vec[:hi-lo]
		for j := lo; j < hi; j++ {
			scores[j-lo] = float32(dot32(q64, k[j*kw+g:j*kw+g+hd]))
		}
		softmax(scores, scores)
		clear(acc)
		for j := lo; j < hi; j++ {
			p := float64(scores[j-lo])
			for d, x := range v[j*kw+g : j*kw+g+hd] {
				acc[d] += p * float64(x)
			}
		}
		o := out[t*qw+h*hd : t*qw+(h+1)*hd]
		for d, x := range acc {
			o[d] = float32(x)
		}
	})
}

func (c *cpuBackend) MoE(out, u, x Buf, rows int, w MoEWeights) error {
	E, H, F, err := CheckMoE(out, u, x, rows, w)
	if err != nil {
		return err
	}
	b, err := c.bufs(out, u, x, w.RouterScale, w.PerExpertScale)
	if err != nil {
		return err
	}
	var mats [3]*matrix
	for i, wt := range []Weight{w.Router, w.GateUp, w.Down} {
		if mats[i], err = cpuWeightOf(wt); err != nil {
			return err
		}
	}
	m := c.cpuModel(H, 0)
	m.numExperts, m.topK, m.expertFF, m.eps, m.routerRoot = E, w.TopK, F, w.Eps, w.RouterRoot
	l := &layer{router: mats[0], gateUp: mats[1], expDown: mats[2], routerScale: b[3][:H], perExpertScale: b[4][:E]}
	idx, wts := m.route(l, b[2][:rows*H], rows)
	copy(b[0], m.experts(l, b[1][:rows*H], rows, idx, wts))
	return nil
}

func (c *cpuBackend) Categorical(out, logits Buf, rows, v int, us []float64) error {
	if err := CheckCategorical(out, logits, rows, v, us); err != nil {
		return err
	}
	b, err := c.bufs(out, logits)
	if err != nil {
		return err
	}
	for r := range rows {
		b[0][r] = float32(sampCategorical(b[1][r*v:(r+1)*v], us[r]))
	}
	return nil
}
