package runtime

// attention runs the attention block of layer l (MODEL_SPEC §3.3) on the
// normed input a ([S][H]) of S tokens at positions pos0…pos0+S−1 and returns
// o_proj's output ([S][H]).
//
// Keys and values are the positions kv holds followed by the S new ones. The
// encoder (encoder true) is causal, and a sliding layer additionally hides
// keys at or before p − W from the query at p; its new K/V are appended to
// kv. The decoder attends bidirectionally to everything kv holds plus the
// canvas, and leaves kv unchanged (the sliding cache already holds only the
// last W−1 prefix positions).
func (m *Model) attention(l *layer, a []float32, S, pos0 int, kv *kvLayer, encoder bool) []float32 {
	H, nq, nkv, hd := m.hidden, m.heads, l.nkv, l.hd
	qw, kw := nq*hd, nkv*hd
	a64 := toF64(a, nil)
	q := make([]float32, S*qw)
	k := make([]float32, S*kw)
	v := make([]float32, S*kw)
	jobs := []mmJob{
		{w: l.q, n: qw, x: a64, T: S, y: q, ldy: qw},
		{w: l.k, n: kw, x: a64, T: S, y: k, ldy: kw},
	}
	if l.v != nil {
		jobs = append(jobs, mmJob{w: l.v, n: kw, x: a64, T: S, y: v, ldy: kw})
	}
	m.matmuls(jobs)
	if l.v == nil {
		copy(v, k) // K=V: full layers take V from the raw k_proj output
	}

	// q ← RoPE(q_norm(q)); k ← RoPE(k_norm(k)); v ← v_norm(v) (no scale), per head.
	cos, sin := l.rope.table(pos0, S)
	half := hd / 2
	for t := range S {
		c, s := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
		for h := range nq {
			x := q[t*qw+h*hd : t*qw+(h+1)*hd]
			rmsNorm(x, l.qNorm, x, m.eps)
			applyRope(x, c, s)
		}
		for h := range nkv {
			x := k[t*kw+h*hd : t*kw+(h+1)*hd]
			rmsNorm(x, l.kNorm, x, m.eps)
			applyRope(x, c, s)
			y := v[t*kw+h*hd : t*kw+(h+1)*hd]
			rmsNorm(y, nil, y, m.eps)
		}
	}

	// Keys and values visible to this call: the cached rows, then the new
	// ones, row j at absolute position kv.start + j.
	cached := kv.len()
	kstart := pos0 - cached // absolute position of key 0
	if kv.start != kstart {
		panic("runtime: KV cache out of step with its length") // Prefill keeps them in step
	}
	kAll := append(append(make([]float32, 0, (cached+S)*kw), kv.k...), k...)
	vAll := append(append(make([]float32, 0, (cached+S)*kw), kv.v...), v...)
	sh := AttentionShape{Rows: S, Heads: nq, KVHeads: nkv, HeadDim: hd, KeyEnd: cached + S}
	if encoder {
		sh.Causal, sh.QueryPos = true, cached // positions relative to key 0
		if l.sliding {
			sh.Window = m.window
		}
	}
	out := make([]float32, S*qw)
	m.attend(out, q, kAll, vAll, sh)
	if encoder {
		kv.appendKV(k, v)
	}
	o := make([]float32, S*H)
	m.matmul(l.o, 0, H, toF64(out, nil), S, o, H)
	return o
}

// dot32 is Σ x[i]·w[i] in order in float64, w widened on the fly.
func dot32(x []float64, w []float32) float64 {
	w = w[:len(x)]
	var s float64
	for i, v := range x {
		s += v * float64(w[i])
	}
	return s
}
