package backend

import (
	"sort"
	"time"
)

// Profiled wraps a backend so that every op waits for its work
// (Sync) and adds its wall time to a per-op total: slower than the plain
// backend (no overlap of host and device), but it says where a step's time
// goes. dgq bench --profile uses it.
type Profiled struct {
	Backend
	on  bool
	ops map[string]*OpTime
}

// OpTime is one op's accumulated time.
type OpTime struct {
	Op    string  `json:"op"`
	Calls int     `json:"calls"`
	Ms    float64 `json:"ms"`
}

// NewProfiled wraps b, not timing until Start.
func NewProfiled(b Backend) *Profiled {
	return &Profiled{Backend: b, ops: map[string]*OpTime{}}
}

// Start clears the totals and starts timing (until Stop: in between,
// every op synchronizes).
func (p *Profiled) Start() { clear(p.ops); p.on = true }

// Stop stops timing: ops pass straight through again.
func (p *Profiled) Stop() { p.on = false }

// Times returns the totals, largest first.
func (p *Profiled) Times() []OpTime {
	var out []OpTime
	for _, t := range p.ops {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ms > out[j].Ms })
	return out
}

func (p *Profiled) timed(op string, f func() error) error {
	if !p.on {
		return f()
	}
	start := time.Now()
	err := f()
	if err == nil {
		err = p.Backend.Sync()
	}
	t := p.ops[op]
	if t == nil {
		t = &OpTime{Op: op}
		p.ops[op] = t
	}
	t.Calls++
	t.Ms += float64(time.Since(start).Microseconds()) / 1000
	return err
}

func (p *Profiled) RMSNorm(y, x, w Buf, rows, n int, eps float32) error {
	return p.timed("RMSNorm", func() error { return p.Backend.RMSNorm(y, x, w, rows, n, eps) })
}
func (p *Profiled) MatMulNT(c, a Buf, w Weight, m int) error {
	return p.timed("MatMulNT", func() error { return p.Backend.MatMulNT(c, a, w, m) })
}
func (p *Profiled) RoPE(x Buf, rows, heads, headDim, pos0 int, invFreq Buf) error {
	return p.timed("RoPE", func() error { return p.Backend.RoPE(x, rows, heads, headDim, pos0, invFreq) })
}
func (p *Profiled) Softcap(x Buf, n int, c float32) error {
	return p.timed("Softcap", func() error { return p.Backend.Softcap(x, n, c) })
}
func (p *Profiled) RowStats(logits Buf, rows, v int, t float32, entropy, argmax Buf) error {
	return p.timed("RowStats", func() error { return p.Backend.RowStats(logits, rows, v, t, entropy, argmax) })
}
func (p *Profiled) Copy(dst Buf, dstOff int, src Buf, srcOff int, n int) error {
	return p.timed("Copy", func() error { return p.Backend.Copy(dst, dstOff, src, srcOff, n) })
}
func (p *Profiled) AddScale(x, y Buf, n int, s float32) error {
	return p.timed("AddScale", func() error { return p.Backend.AddScale(x, y, n, s) })
}
func (p *Profiled) GeluMul(g, u Buf, n int) error {
	return p.timed("GeluMul", func() error { return p.Backend.GeluMul(g, u, n) })
}
func (p *Profiled) Embed(out Buf, table Weight, ids Buf, rows int, scale float32) error {
	return p.timed("Embed", func() error { return p.Backend.Embed(out, table, ids, rows, scale) })
}
func (p *Profiled) SoftEmbed(out, logits Buf, rows int, table Weight, scale float32) error {
	return p.timed("SoftEmbed", func() error { return p.Backend.SoftEmbed(out, logits, rows, table, scale) })
}
func (p *Profiled) Attention(out, q, k, v Buf, a AttentionShape) error {
	return p.timed("Attention", func() error { return p.Backend.Attention(out, q, k, v, a) })
}
func (p *Profiled) MoE(out, u, x Buf, rows int, w MoEWeights) error {
	return p.timed("MoE", func() error { return p.Backend.MoE(out, u, x, rows, w) })
}
func (p *Profiled) Temper(x Buf, n int, t float32) error {
	return p.timed("Temper", func() error { return p.Backend.Temper(x, n, t) })
}
func (p *Profiled) RoundBF16(x Buf, n int) error {
	return p.timed("RoundBF16", func() error { return p.Backend.RoundBF16(x, n) })
}
func (p *Profiled) Categorical(out, logits Buf, rows, v int, us []float64) error {
	return p.timed("Categorical", func() error { return p.Backend.Categorical(out, logits, rows, v, us) })
}
func (p *Profiled) Upload(dst Buf, src []float32) error {
	return p.timed("Upload", func() error { return p.Backend.Upload(dst, src) })
}
func (p *Profiled) Download(src Buf, dst []float32) error {
	return p.timed("Download", func() error { return p.Backend.Download(src, dst) })
}
