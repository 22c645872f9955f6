package cpu

// softChunk is how many canvas rows one soft-embedding item handles: each
// item decodes the whole embedding once, in bands, for its rows.
const softChunk = 16

// softEmbed is P·E for P = softmax of each [V] row of scLogits, computed in
// float32, times the [V][H] embedding: each sum over the vocabulary in
// order in float64, rounded once. Items of softChunk rows stream the
// embedding e in bands of rows, so the table is never decoded whole and the
// probabilities of only softChunk rows are held per worker.
func (p *pool) softEmbed(e *matrix, scLogits []float32, C int) []float32 {
	H, V := e.cols(), e.rows()
	out := make([]float32, C*H)
	rb := max(1, bandElems/H)
	p.parallel((C+softChunk-1)/softChunk, func(s *scratch, item int) {
		t0 := item * softChunk
		n := min(softChunk, C-t0)
		s.vec = grow32(s.vec, n*V)
		probs := s.vec[:n*V]
		for r := range n {
			softmax(scLogits[(t0+r)*V:(t0+r+1)*V], probs[r*V:(r+1)*V])
		}
		s.vec2 = grow64(s.vec2, n*H)
		acc := s.vec2[:n*H]
		clear(acc)
		s.f32 = grow32(s.f32, rb*H)
		s.f64 = grow64(s.f64, rb*H)
		for v0 := 0; v0 < V; v0 += rb {
			if p.stopped() {
				return // the op reports the interruption
			}
			nb := min(rb, V-v0)
			e.decode64(v0, nb, s.f32, s.f64)
			for r := range n {
				a := acc[r*H : (r+1)*H]
				for i, p := range probs[r*V+v0 : r*V+v0+nb] {
					if p == 0 {
						continue // adds exactly nothing
					}
					pf := float64(p)
					e := s.f64[i*H : (i+1)*H]
					for j := range a {
						a[j] += pf * e[j]
					}
				}
			}
		}
		for i, v := range acc {
			out[t0*H+i] = float32(v)
		}
	})
	return out
}
