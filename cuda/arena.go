package cuda

import "fmt"

// arena is a backend's scratch memory: one grow-only device buffer per name,
// kept between calls and freed by Close. A buffer that must grow is freed
// (after the queued work: Free waits for the stream) and reallocated, so an
// address stays valid until the next get of the same name. Every op's
// scratch has its own name (below), so one call's buffers never alias.
type arena struct {
	d    *Device
	bufs map[string]*Buffer
}

// Scratch names.
const (
	scrMatMulW   = "matmul.w"    // MatMulNT: the weight decoded to f32
	scrMatMulA16 = "matmul.a16"  // MatMulNT, bf16: the activations rounded to bf16
	scrMatMulQ4A = "matmul.q4a"  // MatMulNT, q4 GEMM: the activations packed to fp16
	scrMatMulQ4S = "matmul.q4s"  // and their row scalings
	scrAttn      = "attn.scores" // Attention: scores, then probabilities
	scrAttnQ     = "attn.q"      // Attention, GEMM path: regrouped queries and outputs of a chunk
	scrSoftProbs = "soft.probs"  // SoftEmbed: probabilities of a chunk of rows
	scrSoftBand  = "soft.band"   // SoftEmbed: a decoded band of table rows
	scrSoftP16   = "soft.p16"    // SoftEmbed, bf16: the probabilities rounded to bf16
	scrUniform   = "sample.u"    // Categorical: the rows' uniforms
	// MoE (backend_moe.go): "moe." + the moeScratch field.
)

func newArena(d *Device) arena { return arena{d: d, bufs: map[string]*Buffer{}} }

// get returns the named buffer, grown to at least n bytes (at least 16;
// past 1 MiB rounded up to whole MiB, so that slowly growing shapes do not
// reallocate every call).
func (a *arena) get(name string, n int64) (*Buffer, error) {
	n = max(n, 16)
	if b := a.bufs[name]; b != nil {
		if b.Size() >= n {
			return b, nil
		}
		delete(a.bufs, name)
		if err := b.Free(); err != nil {
			return nil, err
		}
	}
	if n > 1<<20 {
		n = (n + 1<<20 - 1) &^ (1<<20 - 1)
	}
	b, err := a.d.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("cuda: scratch %s of %d bytes: %w", name, n, err)
	}
	a.bufs[name] = b
	return b, nil
}

// ptr is get's address.
func (a *arena) ptr(name string, n int64) (Ptr, error) {
	b, err := a.get(name, n)
	if err != nil {
		return 0, err
	}
	return b.Ptr(), nil
}

// free releases every buffer.
func (a *arena) free() error {
	var first error
	for name, b := range a.bufs {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
		delete(a.bufs, name)
	}
	return first
}
