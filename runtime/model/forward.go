package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// arena holds the engine's activation buffers by role, each grown to the
// largest pass seen (never shrunk) and freed by Close.
type arena struct {
	b                                                      backend.Backend
	x, a, q, k, v, att, o, g, u, h1, h2, ids, soft, logits backend.Buf
	ent, amax, draw                                        backend.Buf
}

func (s *arena) slots() []*backend.Buf {
	return []*backend.Buf{&s.x, &s.a, &s.q, &s.k, &s.v, &s.att, &s.o, &s.g, &s.u, &s.h1, &s.h2, &s.ids,
		&s.soft, &s.logits, &s.ent, &s.amax, &s.draw}
}

// free releases every buffer.
func (s *arena) free() error {
	var errs []error
	for _, p := range s.slots() {
		if *p != nil {
			errs = append(errs, (*p).Free())
			*p = nil
		}
	}
	return errors.Join(errs...)
}

// get makes *slot hold at least n values (its contents are lost when it
// grows) and returns it.
func (s *arena) get(slot *backend.Buf, n int) (backend.Buf, error) {
	if *slot != nil && (*slot).Len() >= n {
		return *slot, nil
	}
	if *slot != nil {
		if err := (*slot).Free(); err != nil {
			return nil, err
		}
		*slot = nil
	}
	b, err := s.b.Alloc(max(n, 1))
	if err != nil {
		return nil, fmt.Errorf("model: engine: %w", err)
	}
	*slot = b
	return b, nil
}

// Cache is an Engine's KV cache of one sequence: per layer, keys
// (after k_norm and RoPE) and values (after v_norm) of every position seen,
// as backend buffers of rows nkv·hd wide. Sliding layers keep every
// position too; attention hides what the window hides (MODEL_SPEC §3.6).
// Rows past Len are scratch: a denoising step writes its canvas's K/V there.
type Cache struct {
	e    *Engine
	n    int
	cap  int
	k, v []backend.Buf
}

// NewCache returns an empty cache.
func (e *Engine) NewCache() *Cache {
	return &Cache{e: e, k: make([]backend.Buf, len(e.dec)), v: make([]backend.Buf, len(e.dec))}
}

// Len is the number of positions seen: the position of the next token.
func (c *Cache) Len() int { return c.n }

// Free releases the cache's buffers.
func (c *Cache) Free() error {
	var first error
	for i := range c.k {
		for _, b := range []backend.Buf{c.k[i], c.v[i]} {
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
func (c *Cache) reserve(rows int) error {
	if rows <= c.cap {
		return nil
	}
	newCap := max(rows, 2*c.cap, 256)
	for i, el := range c.e.dec {
		w := el.l.nkv * el.l.hd
		for _, p := range []*backend.Buf{&c.k[i], &c.v[i]} {
			nb, err := c.e.b.Alloc(newCap * w)
			if err != nil {
				return fmt.Errorf("model: engine: KV cache of %d positions: %w", newCap, err)
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

func (e *Engine) checkCache(c *Cache) error {
	if c == nil || c.e != e {
		return ErrCache
	}
	return nil
}

// uploadIDs puts ids into the ids buffer as float32 values.
func (e *Engine) uploadIDs(ids []int) (backend.Buf, error) {
	b, err := e.s.get(&e.s.ids, len(ids))
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
// K/V to the cache (MODEL_SPEC §3.8). Image placeholder ids (config
// image_token_id) are embedded as the pad token, as transformers' encoder
// does for a text-only pass. Prefilling in several chunks gives the same
// cache as one call. When hidden is not nil it receives the
// final-normed hidden states ([len(ids)][H]).
//
// ctx is checked between layers and ops (and lent to a Cancelable backend,
// whose long ops check it too); when it is done the call returns an error
// wrapping ctx.Err() and the cache is as it was before the call.
func (e *Engine) Prefill(ctx context.Context, c *Cache, ids []int, hidden []float32) error {
	return e.run(ctx, "prefill", func() error { return e.prefill(ctx, c, ids, hidden) })
}

// run brackets one forward call (Prefill, Denoise, Step): it refuses a done
// ctx, lends ctx to a Cancelable backend for the span of the call, and when
// ctx ends the call it waits for the work the backend queued (so every
// buffer may be freed at once) and returns an error wrapping
// ctx.Err() in place of whatever the interrupted call returned.
func (e *Engine) run(ctx context.Context, what string, f func() error) error {
	if ctx.Err() != nil {
		return interruptedErr(ctx, what)
	}
	if cb, ok := e.b.(backend.Cancelable); ok {
		cb.SetContext(ctx)
		defer cb.SetContext(nil)
	}
	err := f()
	if err != nil && ctx.Err() != nil {
		return errors.Join(interruptedErr(ctx, what), e.b.Sync())
	}
	return err
}

// interruptedErr is the error of a forward call that ctx ended.
func interruptedErr(ctx context.Context, what string) error {
	return fmt.Errorf("model: engine: %s interrupted: %w", what, ctx.Err())
}

// ops runs ops in order, checking ctx before each: on an asynchronous
// backend a cancellation then queues no more work; on the CPU backend each
// op also checks it as it goes.
func ops(ctx context.Context, fs ...func() error) error {
	for _, f := range fs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) prefill(ctx context.Context, c *Cache, ids []int, hidden []float32) error {
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
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.layerForward(ctx, &e.enc[i], x, S, c.n, c, i, true); err != nil {
			return fmt.Errorf("model: engine: prefill layer %d: %w", i, err)
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
func (e *Engine) embedIDs(table backend.Weight, ids []int) (backend.Buf, error) {
	idb, err := e.uploadIDs(ids)
	if err != nil {
		return nil, err
	}
	x, err := e.s.get(&e.s.x, len(ids)*e.m.hidden)
	if err != nil {
		return nil, err
	}
	return x, e.b.Embed(x, table, idb, len(ids), e.m.embedScale)
}

// denoise runs one decoder step over canvas (Denoise) and leaves the
// soft-capped logits [len(canvas)][V] in e.s.logits. sc is nil (no
// self-conditioning) or a buffer of [len(canvas)][V] logits; it may be
// e.s.logits itself. record, when not nil, is called with the residual
// buffer at each point Denoise records a hidden state. ctx is checked
// between layers and ops.
func (e *Engine) denoise(ctx context.Context, c *Cache, canvas []int, sc backend.Buf, record func(backend.Buf) error) error {
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
		g, err := e.selfCondition(ctx, sc, C)
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
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.layerForward(ctx, &e.dec[i], x, C, c.n, c, i, false); err != nil {
			return fmt.Errorf("model: engine: denoise layer %d: %w", i, err)
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
	logits, err := e.s.get(&e.s.logits, C*V)
	if err != nil {
		return err
	}
	return ops(ctx,
		func() error { return e.b.MatMulNT(logits, x, e.lmHead, C) },
		func() error {
			if e.m.softcap > 0 {
				return e.b.Softcap(logits, C*V, e.m.softcap)
			}
			return nil
		})
}

// selfCondition computes the self-conditioning MLP's output from the SC
// logits (MODEL_SPEC §3.9 step 2: P = softmax(ℓ_sc), the soft embedding
// (P·E)·s, pre_norm, then the SC MLP) into e.s.h2.
func (e *Engine) selfCondition(ctx context.Context, sc backend.Buf, C int) (backend.Buf, error) {
	H, I := e.m.hidden, e.m.scGate.rows
	soft, err := e.s.get(&e.s.soft, C*H)
	if err != nil {
		return nil, err
	}
	err = ops(ctx,
		func() error { return e.b.SoftEmbed(soft, sc, C, e.embed, e.m.embedScale) },
		func() error { return e.b.RMSNorm(soft, soft, e.scPreNorm, C, H, e.m.eps) })
	if err != nil {
		return nil, err
	}
	return e.mlp(ctx, e.scGate, e.scUp, e.scDown, soft, C, I, &e.s.h2)
}

// mlp is down(gelu(gate(x))·up(x)) into *out ([S][H]).
func (e *Engine) mlp(ctx context.Context, gate, up, down backend.Weight, x backend.Buf, S, I int, out *backend.Buf) (backend.Buf, error) {
	g, err := e.s.get(&e.s.g, S*I)
	if err != nil {
		return nil, err
	}
	u, err := e.s.get(&e.s.u, S*I)
	if err != nil {
		return nil, err
	}
	y, err := e.s.get(out, S*e.m.hidden)
	if err != nil {
		return nil, err
	}
	err = ops(ctx,
		func() error { return e.b.MatMulNT(g, x, gate, S) },
		func() error { return e.b.MatMulNT(u, x, up, S) },
		func() error { return e.b.GeluMul(g, u, S*I) },
		func() error { return e.b.MatMulNT(y, g, down, S) })
	if err != nil {
		return nil, err
	}
	return y, nil
}

// layerForward updates the residual stream x ([S][H]) through one layer
// (MODEL_SPEC §3.2) for S tokens at positions pos0…; layer li's K/V are
// written to the cache rows pos0… (the encoder's then count, c.n moves in
// Prefill; the decoder's are scratch).
func (e *Engine) layerForward(ctx context.Context, el *engLayer, x backend.Buf, S, pos0 int, c *Cache, li int, encoder bool) error {
	H, eps, b := e.m.hidden, e.m.eps, e.b
	l := el.l
	a, err := e.s.get(&e.s.a, S*H)
	if err != nil {
		return err
	}
	if err := b.RMSNorm(a, x, el.inNorm, S, H, eps); err != nil {
		return err
	}
	o, err := e.attention(ctx, el, a, S, pos0, c, li, encoder)
	if err != nil {
		return err
	}
	err = ops(ctx,
		func() error { return b.RMSNorm(o, o, el.postAttnNorm, S, H, eps) },
		func() error { return b.AddScale(x, o, S*H, 1) },
		func() error { return b.RMSNorm(a, x, el.preFFNorm, S, H, eps) })
	if err != nil {
		return err
	}
	h1, err := e.mlp(ctx, el.gate, el.up, el.down, a, S, l.gate.rows, &e.s.h1)
	if err != nil {
		return err
	}
	h2, err := e.s.get(&e.s.h2, S*H)
	if err != nil {
		return err
	}
	return ops(ctx,
		func() error { return b.RMSNorm(h1, h1, el.postFFNorm1, S, H, eps) },
		func() error { return b.RMSNorm(a, x, el.preFFNorm2, S, H, eps) },
		func() error { return b.MoE(h2, a, x, S, el.moe) },
		func() error { return b.RMSNorm(h2, h2, el.postFFNorm2, S, H, eps) },
		func() error { return b.AddScale(h1, h2, S*H, 1) },
		func() error { return b.RMSNorm(h1, h1, el.postFFNorm, S, H, eps) },
		func() error { return b.AddScale(x, h1, S*H, l.scalar) })
}

// attention runs the attention block (MODEL_SPEC §3.3) on the normed input
// a and returns o_proj's output in e.s.o.
func (e *Engine) attention(ctx context.Context, el *engLayer, a backend.Buf, S, pos0 int, c *Cache, li int, encoder bool) (backend.Buf, error) {
	l, b, eps := el.l, e.b, e.m.eps
	nq, nkv, hd := e.m.heads, l.nkv, l.hd
	qw, kw := nq*hd, nkv*hd
	q, err := e.s.get(&e.s.q, S*qw)
	if err != nil {
		return nil, err
	}
	k, err := e.s.get(&e.s.k, S*kw)
	if err != nil {
		return nil, err
	}
	v, err := e.s.get(&e.s.v, S*kw)
	if err != nil {
		return nil, err
	}
	att, err := e.s.get(&e.s.att, S*qw)
	if err != nil {
		return nil, err
	}
	o, err := e.s.get(&e.s.o, S*e.m.hidden)
	if err != nil {
		return nil, err
	}
	err = ops(ctx,
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
			sh := backend.AttentionShape{Rows: S, Heads: nq, KVHeads: nkv, HeadDim: hd}
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
		func() error { return b.MatMulNT(o, att, el.o, S) })
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Denoise runs one decoder step over canvas at positions
// c.Len()…c.Len()+len(canvas)−1 (MODEL_SPEC §3.9): bidirectional over the
// canvas, attending to the cached prefix (sliding layers see only its last
// W−1 positions). It does not advance the cache. scLogits is nil (no
// self-conditioning: the first step of a block) or [len(canvas)][V] logits
// as transformers passes them (already divided by the temperature). It
// returns the soft-capped logits [len(canvas)][V], downloaded. When hidden
// is not nil, it appends L+1 copies of the residual stream ([len(canvas)][H]
// each): the decoder input after self-conditioning, the output of layers
// 1…L−1, and the final-normed output of layer L (transformers'
// hidden_states). ctx is checked as Prefill checks it.
func (e *Engine) Denoise(ctx context.Context, c *Cache, canvas []int, scLogits []float32, hidden *[][]float32) ([]float32, error) {
	var logits []float32
	err := e.run(ctx, "denoise", func() error {
		var err error
		logits, err = e.denoiseHost(ctx, c, canvas, scLogits, hidden)
		return err
	})
	if err != nil {
		return nil, err
	}
	return logits, nil
}

// denoiseHost is Denoise within run.
func (e *Engine) denoiseHost(ctx context.Context, c *Cache, canvas []int, scLogits []float32, hidden *[][]float32) ([]float32, error) {
	C, H, V := len(canvas), e.m.hidden, e.m.vocab
	var sc backend.Buf
	if scLogits != nil {
		if len(scLogits) != C*V {
			return nil, inputErr("self-conditioning logits hold %d values, want %d×%d", len(scLogits), C, V)
		}
		b, err := e.s.get(&e.s.logits, C*V)
		if err != nil {
			return nil, err
		}
		if err := e.b.Upload(b, scLogits); err != nil {
			return nil, err
		}
		sc = b
	}
	var record func(backend.Buf) error
	if hidden != nil {
		record = func(x backend.Buf) error {
			h := make([]float32, C*H)
			if err := e.b.Download(x, h); err != nil {
				return err
			}
			*hidden = append(*hidden, h)
			return nil
		}
	}
	if err := e.denoise(ctx, c, canvas, sc, record); err != nil {
		return nil, err
	}
	logits := make([]float32, C*V)
	return logits, e.b.Download(e.s.logits, logits)
}
