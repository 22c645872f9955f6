package cpu

import "github.com/dgq-dev/dgq/runtime/backend"

// attend is Attention on host slices with the CPU runtime's arithmetic:
// each score the float64 dot product rounded to f32, softmax in f32, the
// weighted sum of values in float64 rounded once.
func (p *pool) attend(out, q, k, v []float32, a backend.AttentionShape) {
	nq, hd := a.Heads, a.HeadDim
	qw, kw := nq*hd, a.KVHeads*hd
	group := nq / a.KVHeads
	span := a.KeyEnd - a.KeyStart
	if a.Causal {
		span = a.QueryPos + a.Rows - a.KeyStart
	}
	p.parallelCost(a.Rows*nq, a.Rows*nq*span*hd*2, func(s *scratch, item int) {
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

// dot32 is Σ x[i]·w[i] in order in float64, w widened on the fly.
func dot32(x []float64, w []float32) float64 {
	w = w[:len(x)]
	var s float64
	for i, v := range x {
		s += v * float64(w[i])
	}
	return s
}
