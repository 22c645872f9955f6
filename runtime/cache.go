package runtime

// Cache is the KV cache of one sequence, with transformers' DynamicCache
// semantics (MODEL_SPEC §3.6): full-attention layers keep every position;
// sliding-window layers keep only the last W−1 positions, which is exactly
// what both the next encoder chunk (its first query sees W−1 earlier keys)
// and the decoder (the canvas sees the last W−1 prefix positions on
// sliding layers) need. Keys are stored after k_norm and RoPE, values after
// v_norm, in float32. Only Prefill writes to a cache. A Cache is not safe
// for concurrent use; distinct caches of one model may be used concurrently.
type Cache struct {
	m      *Model
	n      int // positions seen so far (cumulative)
	layers []kvLayer
}

// kvLayer holds the stored positions start…start+len−1 of one layer, rows
// of width nkv·hd.
type kvLayer struct {
	keep  int // positions kept after an update; < 0 keeps all
	width int // nkv·hd
	start int
	k, v  []float32
}

func (l *kvLayer) len() int { return len(l.k) / l.width }

// NewCache returns an empty cache for m.
func (m *Model) NewCache() *Cache {
	c := &Cache{m: m, layers: make([]kvLayer, len(m.dec))}
	for i, l := range m.dec {
		c.layers[i] = kvLayer{keep: -1, width: l.nkv * l.hd}
		if l.sliding {
			c.layers[i].keep = m.window - 1
		}
	}
	return c
}

// Len is the number of positions seen so far (cumulative, like
// DynamicCache.get_seq_length): the position of the next token.
func (c *Cache) Len() int { return c.n }

// Clone returns an independent copy of c.
func (c *Cache) Clone() *Cache {
	d := &Cache{m: c.m, n: c.n, layers: make([]kvLayer, len(c.layers))}
	for i, l := range c.layers {
		l.k = append([]float32(nil), l.k...)
		l.v = append([]float32(nil), l.v...)
		d.layers[i] = l
	}
	return d
}

// appendKV appends s positions of keys and values (rows of l.width) and, on
// a sliding layer, drops all but the last keep positions.
func (l *kvLayer) appendKV(k, v []float32) {
	l.k = append(l.k, k...)
	l.v = append(l.v, v...)
	if l.keep >= 0 {
		if drop := l.len() - l.keep; drop > 0 {
			n := copy(l.k, l.k[drop*l.width:])
			l.k = l.k[:n]
			n = copy(l.v, l.v[drop*l.width:])
			l.v = l.v[:n]
			l.start += drop
		}
	}
}
