package cpu

import (
	"time"

	"github.com/dgq-dev/dgq/codecs"
)

// MACRate measures the backend's matrix product on this machine, in
// multiply-adds per second on workers goroutines (≤ 0: GOMAXPROCS): a product
// of 64 positions with a 512 × 2816 bf16 matrix (the released model's hidden
// width; about 9·10⁷ multiply-adds, tens of milliseconds), the best of three.
// It is the rate of raw weights; quantized ones add their decode.
func MACRate(workers int) float64 {
	const rows, k, T = 512, 2816, 64
	w := &matrix{name: "probe", f: codecs.Raw, dt: codecs.BF16, geom: codecs.Matrix{Rows: rows, K: k, Mats: 1}, b: make([]byte, 2*rows*k)}
	for i := 1; i < len(w.b); i += 2 {
		w.b[i] = 0x3f // bf16 values of 0.5 … 1
	}
	x := make([]float64, T*k)
	for i := range x {
		x[i] = float64(i%7) / 7
	}
	y := make([]float32, T*rows)
	p := newPool(workers)
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		p.matmul(w, 0, rows, x, T, y, rows)
		best = min(best, time.Since(start))
	}
	return float64(rows*k*T) / max(best.Seconds(), 1e-9)
}
