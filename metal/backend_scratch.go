package metal

import "fmt"

// Scratch: one grow-only engine buffer per name, kept between calls and
// freed by Close. A buffer that must grow is replaced; work already queued
// keeps the old one (Mem.Free's contract on both engines).

// Scratch names.
const (
	scrStage   = "upload.stage" // pack bytes of one re-lay step
	scrAttn    = "attn.scores"  // Heads·Rows·span f32 of the tiled attention
	scrProbs   = "soft.probs"   // SoftEmbed's probabilities of a chunk of rows
	scrUniform = "sample.u"     // Categorical's uniforms
)

// scratchMem returns the scratch buffer name of at least n bytes.
func (b *metalBackend) scratchMem(name string, n int64) (Mem, error) {
	if m, ok := b.scratch[name]; ok && int64(len(m.Bytes())) >= n {
		return m, nil
	}
	size := max(n, 4)
	if size > 1<<20 {
		size = (size + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB, so that small growth reuses it
	}
	m, err := b.e.Alloc(int(size))
	if err != nil {
		return nil, fmt.Errorf("metal: scratch %s of %d bytes: %w", name, size, err)
	}
	if old, ok := b.scratch[name]; ok {
		old.Free()
	}
	b.scratch[name] = m
	return m, nil
}

// freeScratch releases every scratch buffer.
func (b *metalBackend) freeScratch() {
	for name, m := range b.scratch {
		m.Free()
		delete(b.scratch, name)
	}
}
