package cpu

import (
	"math"
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// pool runs the backend's parallel work: at most workers goroutines, each
// with its own scratch (reused through a sync.Pool).
type pool struct {
	workers int
	scratch sync.Pool
	// done, when closed, makes parallel jobs stop taking items (the
	// backend's SetContext); nil never stops them.
	done <-chan struct{}
}

// stopped reports whether done is closed: the job in progress should stop
// between items.
func (p *pool) stopped() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func newPool(workers int) *pool {
	if workers <= 0 {
		workers = goruntime.GOMAXPROCS(0)
	}
	p := &pool{workers: workers}
	p.scratch.New = func() any { return new(scratch) }
	return p
}

// scratch is one worker's reusable buffers: a decoded weight band (float32
// and float64) and small per-item vectors.
type scratch struct {
	f32  []float32
	f64  []float64
	vec  []float32
	vec2 []float64
}

func grow32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func grow64(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}

// parallel calls fn(s, i) for every item i in [0, n), on at most
// p.workers goroutines that take items in order from a shared counter; s is
// the calling goroutine's scratch. Each item must write outputs no other item
// writes, so the result does not depend on which goroutine runs which item.
// Once p.done is closed no further item starts (the caller's op then
// reports the interruption).
func (p *pool) parallel(n int, fn func(s *scratch, item int)) {
	p.parallelCost(n, math.MaxInt, fn)
}

// minParallelCost is the work (multiply-adds) below which a job runs on the
// calling goroutine: starting workers would cost more than it saves.
const minParallelCost = 1 << 16

// parallelCost is parallel for a job of about cost multiply-adds.
func (p *pool) parallelCost(n, cost int, fn func(s *scratch, item int)) {
	if n <= 0 {
		return
	}
	workers := min(p.workers, n)
	if cost < minParallelCost {
		workers = 1
	}
	if workers <= 1 {
		s := p.scratch.Get().(*scratch)
		for i := range n {
			if p.stopped() {
				break
			}
			fn(s, i)
		}
		p.scratch.Put(s)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			s := p.scratch.Get().(*scratch)
			for {
				i := int(next.Add(1) - 1)
				if i >= n || p.stopped() {
					break
				}
				fn(s, i)
			}
			p.scratch.Put(s)
		})
	}
	wg.Wait()
}

// bandElems is the target size of one decoded weight band, in float64
// values (256 KiB: it stays in L2, beside the input rows, while every token
// uses it).
const bandElems = 32768

// bandRows is how many rows of a K-wide matrix one band holds: about
// bandElems values, a multiple of 4 (the kernel's row block), and small
// enough that n rows give every worker at least two bands.
func (p *pool) bandRows(n, k int) int {
	r := max(4, bandElems/max(k, 1)) &^ 3
	if per := (n + 2*p.workers - 1) / (2 * p.workers); per < r {
		r = max(4, (per+3)&^3)
	}
	return r
}

// toF64 widens x into dst (exact).
func toF64(x []float32, dst []float64) []float64 {
	dst = grow64(dst, len(x))
	for i, v := range x {
		dst[i] = float64(v)
	}
	return dst
}

// mmJob is one matrix product: y[t·ldy + o] = Σ_k x[t][k]·W[r0+o][k] for
// t < T, o < n, i.e. T input rows times rows r0…r0+n−1 of w (PyTorch's x·Wᵀ).
// x holds the T input rows widened to float64 ([T][K]).
type mmJob struct {
	w     *matrix
	r0, n int
	x     []float64
	T     int
	y     []float32
	ldy   int
}

// matmul runs one product; see mmJob.
func (p *pool) matmul(w *matrix, r0, n int, x []float64, T int, y []float32, ldy int) {
	p.matmuls([]mmJob{{w: w, r0: r0, n: n, x: x, T: T, y: y, ldy: ldy}})
}

// matmuls runs independent products as one parallel job: each product's
// rows are cut into bands, a band is decoded once into the worker's scratch
// and multiplied with every input row. Each sum runs over k in order in
// float64 and is rounded once to float32, whatever the band or worker, so
// results do not depend on the worker count.
func (p *pool) matmuls(jobs []mmJob) {
	total := 0
	for _, j := range jobs {
		if j.T > 0 {
			total += j.n
		}
	}
	if total == 0 {
		return
	}
	type band struct{ job, o0, nb int }
	var bands []band
	cost := 0
	for ji, j := range jobs {
		cost += j.T * j.n * j.w.cols()
		if j.T == 0 || j.n == 0 {
			continue
		}
		rb := p.bandRows(total, j.w.cols())
		for o0 := 0; o0 < j.n; o0 += rb {
			bands = append(bands, band{ji, o0, min(rb, j.n-o0)})
		}
	}
	p.parallelCost(len(bands), cost, func(s *scratch, bi int) {
		b := bands[bi]
		j := &jobs[b.job]
		k := j.w.cols()
		s.f32 = grow32(s.f32, b.nb*k)
		s.f64 = grow64(s.f64, b.nb*k)
		j.w.decode64(j.r0+b.o0, b.nb, s.f32, s.f64)
		mulBand(j.x, j.T, k, s.f64[:b.nb*k], b.nb, j.y, j.ldy, b.o0)
	})
}

// mulBand multiplies T input rows (x, [T][k]) with nb decoded weight rows
// (band, [nb][k]), writing y[t·ldy + o0 + r]. Blocks of 2 tokens × 4 rows
// keep eight independent sums in flight; every sum still runs over k in
// order, so the blocking does not change any result.
func mulBand(x []float64, T, k int, band []float64, nb int, y []float32, ldy, o0 int) {
	t := 0
	for ; t+2 <= T; t += 2 {
		x0, x1 := x[t*k:(t+1)*k], x[(t+1)*k:(t+2)*k]
		y0, y1 := y[t*ldy+o0:t*ldy+o0+nb], y[(t+1)*ldy+o0:(t+1)*ldy+o0+nb]
		r := 0
		for ; r+4 <= nb; r += 4 {
			a, b := dot2x4(x0, x1, band[r*k:(r+4)*k])
			y0[r], y0[r+1], y0[r+2], y0[r+3] = float32(a[0]), float32(a[1]), float32(a[2]), float32(a[3])
			y1[r], y1[r+1], y1[r+2], y1[r+3] = float32(b[0]), float32(b[1]), float32(b[2]), float32(b[3])
		}
		for ; r < nb; r++ {
			w := band[r*k : (r+1)*k]
			y0[r], y1[r] = float32(dot(x0, w)), float32(dot(x1, w))
		}
	}
	for ; t < T; t++ {
		xt := x[t*k : (t+1)*k]
		yt := y[t*ldy+o0 : t*ldy+o0+nb]
		r := 0
		for ; r+4 <= nb; r += 4 {
			a, b, c, d := dot4(xt, band[r*k:(r+1)*k], band[(r+1)*k:(r+2)*k], band[(r+2)*k:(r+3)*k], band[(r+3)*k:(r+4)*k])
			yt[r], yt[r+1], yt[r+2], yt[r+3] = float32(a), float32(b), float32(c), float32(d)
		}
		for ; r < nb; r++ {
			yt[r] = float32(dot(xt, band[r*k:(r+1)*k]))
		}
	}
}

// dot is Σ x[i]·w[i] accumulated in order. The operands are float32 values,
// so every product is exact in float64 and fusing it into an FMA changes
// nothing.
func dot(x, w []float64) float64 {
	w = w[:len(x)]
	var s float64
	for i, v := range x {
		s += v * w[i]
	}
	return s
}

// dot4 is dot for four rows at once, each sum in the same order as dot.
func dot4(x, w0, w1, w2, w3 []float64) (s0, s1, s2, s3 float64) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for i, v := range x {
		s0 += v * w0[i]
		s1 += v * w1[i]
		s2 += v * w2[i]
		s3 += v * w3[i]
	}
	return
}

// dot2x4 is dot for two input rows and four consecutive weight rows
// (w holds 4·len(x0) values), each sum in the same order as dot.
func dot2x4(x0, x1, w []float64) (a, b [4]float64) {
	k := len(x0)
	x1 = x1[:k]
	w0, w1, w2, w3 := w[:k], w[k:2*k], w[2*k:3*k], w[3*k:4*k]
	var a0, a1, a2, a3, b0, b1, b2, b3 float64
	for i, u := range x0 {
		v := x1[i]
		p, q, r, s := w0[i], w1[i], w2[i], w3[i]
		a0 += u * p
		a1 += u * q
		a2 += u * r
		a3 += u * s
		b0 += v * p
		b1 += v * q
		b2 += v * r
		b3 += v * s
	}
	return [4]float64{a0, a1, a2, a3}, [4]float64{b0, b1, b2, b3}
}
