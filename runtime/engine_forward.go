package runtime

import (
	"fmt"
)

// engScratch holds the engine's activation buffers, grown to the largest
// pass seen (never shrunk).
type engScratch struct {
	x, a, q, k, v, att, o, g, u, h1, h2, ids, soft, logits Buf
	ent, amax, draw                                        Buf
}

func (s *engScratch) free(errs *[]error) {
	for _, p := range []*Buf{&s.x, &s.a, &s.q, &s.k, &s.v, &s.att, &s.o, &s.g, &s.u, &s.h1, &s.h2, &s.ids,
		&s.soft, &s.logits, &s.ent, &s.amax, &s.draw} {
		if *p != nil {
			if err := (*p).Free(); err != nil {
				*errs = append(*errs, err)
			}
			*p = nil
		}
	}
}

// grow makes *slot hold at least n values (its contents are lost when it
// grows).
func (e *Engine) grow(slot *Buf, n int) (Buf, error) {
	if *slot != nil && (*slot).Len() >= n {
		return *slot, nil
	}
	if *slot != nil {
		if err := (*slot).Free(); err != nil {
			return nil, err
		}
		*slot = nil
	}
	b, err := e.b.Alloc(max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("runtime: engine: %w", err)
	}
	*slot = b
	return b, nil
}

// EngineCache is an Engine's KV cache of one sequence: per layer, keys
// (after k_norm and RoPE) and values (after v_norm) of every position seen,
// as backend buffers of rows nkv·hd wide. Sliding layers keep every
// position too; attention hides what the window hides (MODEL_SPEC §3.6).
// Rows past Len are scratch: a denoising step writes its canvas's K/V there.
type EngineCache struct {
	e    *Engine
	n    int
	cap  int
	k, v []Buf
}

// NewCache returns an empty cache.
func (e *Engine) NewCache() *EngineCache {
	return &EngineCache{e: e, k: make([]Buf, len(e.dec)), v: make([]Buf, len(e.dec))}
}

// Len is the number of positions seen: the position of the next token.
func (c *EngineCache) Len() int { return c.n }

// Free releases the cache's buffers.
func (c *EngineCache) Free() error {
	var first error
	for i := range c.k {
		for _, b := range []Buf{c.k[i], c.v[i]} {
			if b != nil {
				if err := b.Free(); err != nil && first == nil {
					first = err
				}
			}
		}
		c.k[i], c.v[i] = nil, nil
	}
	c.cap = 0
	return first
}

// reserve makes room for rows positions, keeping the first c.n.
func (c *EngineCache) reserve(rows int) error {
	if rows <= c.cap {
		return nil
	}
	newCap := max(rows, 2*c.cap, 256)
	for i, el := range c.e.dec {
		w := el.l.nkv * el.l.hd
		for _, p := range []*Buf{&c.k[i], &c.v[i]} {
			nb, err := c.e.b.Alloc(newCap * w)
			if err != nil {
				return fmt.Errorf("runtime: engine: KV cache of %d positions: %w", newCap, err)
			}
			if *p != nil {
				if c.n > 0 {
					if err := c.e.b.Copy(nb, 0, *p, 0, c.n*w); err != nil {
						nb.Free()
						return err
					}
				}
				if err := (*p).Free(); err != nil {
					nb.Free()
					return err
				}
			}
			*p = nb
		}
	}
	c.cap = newCap
	return nil
}

func (e *Engine) checkCache(c *EngineCache) error {
	if c == nil || c.e != e {
		return ErrCache
	}
	return nil
}

// uploadIDs puts ids into the ids buffer as float32 values.
func (e *Engine) uploadIDs(ids []int) (Buf, error) {
	b, err := e.grow(&e.s.ids, len(ids))
	if err != nil {
		return nil, err
	}
	f := make([]float32, len(ids))
	for i, id := range ids {
		f[i] = float32(id)
	}
	return b, e.b.Upload(b, f)
}

// Prefill runs the encoder over ids at positions c.Len()… and appends their
// K/V to the cache (Model.Prefill). When hidden is not nil it receives the
// final-normed hidden states ([len(ids)][H]).
func (e *Engine) Prefill(c *EngineCache, ids []int, hidden []float32) error {
	if err := e.checkCache(c); err != nil {
		return err
	}
	if err := e.m.checkIDs("ids", ids); err != nil {
		return err
	}
	S, H := len(ids), e.m.hidden
	if hidden != nil && len(hidden) != S*H {
		return inputErr("prefill hidden holds %d values, want %d×%d", len(hidden), S, H)
	}
	ids = e.m.encoderIDs(ids)
	if err := c.reserve(c.n + S); err != nil {
		return err
	}
	x, err := e.embedIDs(e.encEmbed, ids)
	if err != nil {
		return err
	}
	for i := range e.enc {
		if err := e.layerForward(&e.enc[i], x, S, c.n, c, i, true); err != nil {
			return fmt.Errorf("runtime: engine: prefill layer %d: %w", i, err)
		}
	}
	c.n += S
	if err := e.b.RMSNorm(x, x, e.encNorm, S, H, e.m.eps); err != nil {
		return err
	}
	if hidden != nil {
		return e.b.Download(x, hidden)
	}
	return nil
}

// embedIDs fills the residual buffer with the scaled embedding rows of ids.
func (e *Engine) embedIDs(table Weight, ids []int) (Buf, error) {
	idb, err := e.uploadIDs(ids)
	if err != nil {
		return nil, err
	}
	x, err := e.grow(&e.s.x, len(ids)*e.m.hidden)
	if err != nil {
		return nil, err
	}
	return x, e.b.Embed(x, table, idb, len(ids), e.m.embedScale)
}

// denoise runs one decoder step over canvas (Model.Denoise) and leaves the
// soft-capped logits [len(canvas)][V] in e.s.logits. sc is nil (no
// self-conditioning) or a buffer of [len(canvas)][V] logits; it may be
// e.s.logits itself. record, when not nil, is called with the residual
// buffer at each point Model.Denoise records a hidden state.
func (e *Engine) denoise(c *EngineCache, canvas []int, sc Buf, record func(Buf) error) error {
	if err := e.checkCache(c); err != nil {
		return err
	}
	if err := e.m.checkIDs("canvas", canvas); err != nil {
		return err
	}
	C, H, V := len(canvas), e.m.hidden, e.m.vocab
	if err := c.reserve(c.n + C); err != nil {
		return err
	}
	x, err := e.embedIDs(e.embed, canvas)
	if err != nil {
		return err
	}
	if sc != nil {
		g, err := e.selfCondition(sc, C)
		if err != nil {
			return err
		}
		if err := e.b.AddScale(x, g, C*H, 1); err != nil {
			return err
		}
	}
	if err := e.b.RMSNorm(x, x, nil, C, H, e.m.eps); err != nil {
		return err
	}
	rec := func() error {
		if record != nil {
			return record(x)
		}
		return nil
	}
	if err := rec(); err != nil {
		return err
	}
	for i := range e.dec {
		if err := e.layerForward(&e.dec[i], x, C, c.n, c, i, false); err != nil {
			return fmt.Errorf("runtime: engine: denoise layer %d: %w", i, err)
		}
		if i < len(e.dec)-1 {
			if err := rec(); err != nil {
				return err
			}
		}
	}
	if err := e.b.RMSNorm(x, x, e.norm, C, H, e.m.eps); err != nil {
		return err
	}
	if err := rec(); err != nil {
		return err
	}
	logits, err := e.grow(&e.s.logits, C*V)
	if err != nil {
		return err
	}
	if err := e.b.MatMulNT(logits, x, e.lmHead, C); err != nil {
		return err
	}
	if e.m.softcap > 0 {
		return e.b.Softcap(logits, C*V, e.m.softcap)
	}
	return nil
}

// selfCondition computes the self-conditioning MLP's output from the SC
// logits (Model.selfCondition) into e.s.h2.
func (e *Engine) selfCondition(sc Buf, C int) (Buf, error) {
	H, I := e.m.hidden, e.m.scGate.rows()
	soft, err := e.grow(&e.s.soft, C*H)
	if err != nil {
		return nil, err
	}
	if err := e.b.SoftEmbed(soft, sc, C, e.embed, e.m.embedScale); err != nil {
		return nil, err
	}
	if err := e.b.RMSNorm(soft, soft, e.scPreNorm, C, H, e.m.eps); err != nil {
		return nil, err
	}
	return e.mlp(e.scGate, e.scUp, e.scDown, soft, C, I, &e.s.h2)
}

// mlp is down(gelu(gate(x))·up(x)) into *out ([S][H]).
func (e *Engine) mlp(gate, up, down Weight, x Buf, S, I int, out *Buf) (Buf, error) {
	g, err := e.grow(&e.s.g, S*I)
	if err != nil {
		return nil, err
	}
	u, err := e.grow(&e.s.u, S*I)
	if err != nil {
		return nil, err
	}
	y, err := e.grow(out, S*e.m.hidden)
	if err != nil {
		return nil, err
	}
	for _, op := range []func() error{
		func() error { return e.b.MatMulNT(g, x, gate, S) },
		func() error { return e.b.MatMulNT(u, x, up, S) },
		func() error { return e.b.GeluMul(g, u, S*I) },
		func() error { return e.b.MatMulNT(y, g, down, S) },
	} {
		if err := op(); err != nil {
			return nil, err
		}
	}
	return y, nil
}

// layerForward updates the residual stream x ([S][H]) through one layer
// (Model.layerForward) for S tokens at positions pos0…; layer li's K/V are
// written to the cache rows pos0… (the encoder's then count, c.n moves in
// Prefill; the decoder's are scratch).
func (e *Engine) layerForward(el *engLayer, x Buf, S, pos0 int, c *EngineCache, li int, encoder bool) error {
	H, eps, b := e.m.hidden, e.m.eps, e.b
	l := el.l
	a, err := e.grow(&e.s.a, S*H)
	if err != nil {
		return err
	}
	if err := b.RMSNorm(a, x, el.inNorm, S, H, eps); err != nil {
		return err
	}
	o, err := e.attention(el, a, S, pos0, c, li, encoder)
	if err != nil {
		return err
	}
	if err := b.RMSNorm(o, o, el.postAttnNorm, S, H, eps); err != nil {
		return err
	}
	if err := b.AddScale(x, o, S*H, 1); err != nil {
		return err
	}
	if err := b.RMSNorm(a, x, el.preFFNorm, S, H, eps); err != nil {
		return err
	}
	h1, err := e.mlp(el.gate, el.up, el.down, a, S, l.gate.rows(), &e.s.h1)
	if err != nil {
		return err
	}
	if err := b.RMSNorm(h1, h1, el.postFFNorm1, S, H, eps); err != nil {
		return err
	}
	if err := b.RMSNorm(a, x, el.preFFNorm2, S, H, eps); err != nil {
		return err
	}
	h2, err := e.grow(&e.s.h2, S*H)
	if err != nil {
		return err
	}
	if err := b.MoE(h2, a, x, S, el.moe); err != nil {
		return err
	}
	for _, op := range []func() error{
		func() error { return b.RMSNorm(h2, h2, el.postFFNorm2, S, H, eps) },
		func() error { return b.AddScale(h1, h2, S*H, 1) },
		func() error { return b.RMSNorm(h1, h1, el.postFFNorm, S, H, eps) },
		func() error { return b.AddScale(x, h1, S*H, l.scalar) },
	} {
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}

// attention runs the attention block (Model.attention) on the normed input
// a and returns o_proj's output in e.s.o.
func (e *Engine) attention(el *engLayer, a Buf, S, pos0 int, c *EngineCache, li int, encoder bool) (Buf, error) {
	l, b, eps := el.l, e.b, e.m.eps
	nq, nkv, hd := e.m.heads, l.nkv, l.hd
	qw, kw := nq*hd, nkv*hd
	q, err := e.grow(&e.s.q, S*qw)
	if err != nil {
		return nil, err
	}
	k, err := e.grow(&e.s.k, S*kw)
	if err != nil {
		return nil, err
	}
	v, err := e.grow(&e.s.v, S*kw)
	if err != nil {
		return nil, err
	}
	att, err := e.grow(&e.s.att, S*qw)
	if err != nil {
		return nil, err
	}
	o, err := e.grow(&e.s.o, S*e.m.hidden)
	if err != nil {
		return nil, err
	}
	ops := []func() error{
		func() error { return b.MatMulNT(q, a, el.q, S) },
		func() error { return b.MatMulNT(k, a, el.k, S) },
		func() error {
			if el.v == nil {
				return b.Copy(v, 0, k, 0, S*kw) // K=V: V is the raw k_proj output
			}
			return b.MatMulNT(v, a, el.v, S)
		},
		func() error { return b.RMSNorm(q, q, el.qNorm, S*nq, hd, eps) },
		func() error { return b.RoPE(q, S, nq, hd, pos0, el.invFreq) },
		func() error { return b.RMSNorm(k, k, el.kNorm, S*nkv, hd, eps) },
		func() error { return b.RoPE(k, S, nkv, hd, pos0, el.invFreq) },
		func() error { return b.RMSNorm(v, v, nil, S*nkv, hd, eps) },
		func() error { return b.Copy(c.k[li], pos0*kw, k, 0, S*kw) },
		func() error { return b.Copy(c.v[li], pos0*kw, v, 0, S*kw) },
		func() error {
			sh := AttentionShape{Rows: S, Heads: nq, KVHeads: nkv, HeadDim: hd}
			if encoder {
				sh.Causal, sh.QueryPos = true, pos0
				if l.sliding {
					sh.Window = e.m.window
				}
			} else {
				sh.KeyEnd = pos0 + S
				if l.sliding {
					sh.KeyStart = max(0, pos0-(e.m.window-1))
				}
			}
			return b.Attention(att, q, c.k[li], c.v[li], sh)
		},
		func() error { return b.MatMulNT(o, att, el.o, S) },
	}
	for _, op := range ops {
		if err := op(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Denoise runs one decoder step (Model.Denoise, same arguments and
// results): scLogits nil or [len(canvas)][V] host logits; it returns the
// soft-capped logits, downloaded, and appends the residual stream at each
// recorded point to *hidden when hidden is not nil.
func (e *Engine) Denoise(c *EngineCache, canvas []int, scLogits []float32, hidden *[][]float32) ([]float32, error) {
	C, H, V := len(canvas), e.m.hidden, e.m.vocab
	var sc Buf
	if scLogits != nil {
		if len(scLogits) != C*V {
			return nil, inputErr("self-conditioning logits hold %d values, want %d×%d", len(scLogits), C, V)
		}
		b, err := e.grow(&e.s.logits, C*V)
		if err != nil {
			return nil, err
		}
		if err := e.b.Upload(b, scLogits); err != nil {
			return nil, err
		}
		sc = b
	}
	var record func(Buf) error
	if hidden != nil {
		record = func(x Buf) error {
			h := make([]float32, C*H)
			if err := e.b.Download(x, h); err != nil {
				return err
			}
			*hidden = append(*hidden, h)
			return nil
		}
	}
	if err := e.denoise(c, canvas, sc, record); err != nil {
		return nil, err
	}
	logits := make([]float32, C*V)
	return logits, e.b.Download(e.s.logits, logits)
}
