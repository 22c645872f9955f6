package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	api "github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// GPU tests of the backend ops beyond the conformance suite
// (runtime/backendtest, TestBackendConformance): bit-exact row gathers and
// row bands on random bytes of every format, attention at larger shapes, and
// timings at the real model's shapes. All skip without a GPU.

// gatherFormats are the formats the device decodes, with the shapes tried.
var gatherFormats = []struct {
	f  codecs.Format
	dt codecs.DType
}{
	{codecs.Raw, codecs.BF16}, {codecs.Raw, codecs.F16}, {codecs.Raw, codecs.F32}, {codecs.Q8, codecs.F32},
	{codecs.Q4, codecs.F32}, {codecs.Q5, codecs.F32}, {codecs.Q6, codecs.F32}, {codecs.NVFP4, codecs.F32},
}

// randomTensor returns random bytes for a tensor of f (random parameters
// give NaN, ±Inf and subnormals; q8 gets special bf16 row scales on every
// other row, q4/q5/q6 special deltas and mins on some blocks, nvfp4 random or
// special matrix scales).
func randomTensor(t *testing.T, rng *rand.Rand, f codecs.Format, dt codecs.DType, m codecs.Matrix) []byte {
	t.Helper()
	size, err := f.EncodedSize(dt, m)
	if err != nil {
		t.Fatal(err)
	}
	enc := randomBytes(rng, size)
	switch f {
	case codecs.Q8:
		setQ8Scales(t, rng, enc, dt, m)
	case codecs.Q4, codecs.Q5, codecs.Q6:
		setAffineParams(t, rng, enc, f, dt, m)
	case codecs.NVFP4:
		setMatScales(t, enc, dt, m, func(int64) uint32 {
			if rng.IntN(2) == 0 {
				return specialScale2[rng.IntN(len(specialScale2))]
			}
			return rng.Uint32()
		})
	}
	return enc
}

// TestEmbedGather checks Ops.Embed bit for bit (NaN matching NaN) against
// codecs.DecodeRows of the whole tensor, gathered and scaled on the host, for
// every device format on random bytes, with repeated ids, the first and last
// rows, and ids that are not rows (negative, Rows, fractions, NaN, ±Inf,
// 2^24), which must give rows of NaN.
func TestEmbedGather(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(41, 42))
	shapes := []codecs.Matrix{{Rows: 1, K: 32}, {Rows: 5, K: 96}, {Rows: 9, K: 16}, {Rows: 17, K: 2816},
		{Rows: 3, K: 33}, {Rows: 1, K: 1}, {Rows: 300, K: 160}, {Rows: 24, K: 64, Mats: 6}}
	nan := float32(math.NaN())
	for _, fd := range gatherFormats {
		for _, m := range shapes {
			if _, err := fd.f.Layout(fd.dt, m); err != nil {
				continue // K not a multiple of the format's group
			}
			enc := randomTensor(t, rng, fd.f, fd.dt, m)
			full := make([]float32, m.Elements())
			if err := codecs.DecodeRows(fd.f, fd.dt, m, enc, 0, m.Rows, full); err != nil {
				t.Fatal(err)
			}
			rows := float32(m.Rows)
			ids := []float32{0, rows - 1, float32(rng.IntN(int(m.Rows))), -1, rows, 0.5, nan,
				float32(math.Inf(1)), float32(math.Inf(-1)), 1 << 24, float32(math.Copysign(0, -1)), rows - 0.5}
			for range 5 {
				ids = append(ids, float32(rng.IntN(int(m.Rows))))
			}
			ids = append(ids, ids[2]) // a repeated id
			n := len(ids)
			eb := uploadTensor(t, ops, fd.f, fd.dt, m, enc)
			ib := upload(t, d, ids)
			ob, err := d.Alloc(4 * (int64(n)*m.K + 1))
			if err != nil {
				t.Fatal(err)
			}
			for _, scale := range []float32{1, 53.06600, -0.37} {
				tail := []float32{-5}
				if err := ob.UploadAt(4*int64(n)*m.K, Bytes(tail)); err != nil {
					t.Fatal(err)
				}
				if err := ops.Embed(ob.Ptr(), ib.Ptr(), eb.Ptr(), fd.f, fd.dt, m, n, scale); err != nil {
					t.Fatalf("%s %s %d×%d: %v", fd.f, fd.dt, m.Rows, m.K, err)
				}
				got := download[float32](t, ob, n*int(m.K)+1)
				bad := 0
				for i, f := range ids {
					r := int(f)
					valid := f >= 0 && f < rows && float32(r) == f
					for j := range m.K {
						want := nan
						if valid {
							want = full[int64(r)*m.K+j] * scale
						}
						if g := got[int64(i)*m.K+j]; !sameBits(g, want) {
							if bad < 5 {
								t.Errorf("%s %s %d×%d scale %g: out[%d][%d] (id %g) = %g (%#08x), want %g (%#08x)", fd.f, fd.dt, m.Rows, m.K,
									scale, i, j, f, g, math.Float32bits(g), want, math.Float32bits(want))
							}
							bad++
						}
					}
				}
				if got[n*int(m.K)] != -5 {
					t.Errorf("%s %s %d×%d: wrote past the rows", fd.f, fd.dt, m.Rows, m.K)
				}
				if bad > 0 {
					t.Errorf("%s %s %d×%d scale %g: %d values differ", fd.f, fd.dt, m.Rows, m.K, scale, bad)
				}
			}
			freeAll(eb, ib, ob)
		}
	}
}

// TestDequantRows checks Ops.DequantRows (SoftEmbed's bands) bit for bit
// against codecs.DecodeRows of the same rows, for every device format on
// random bytes and on encoder output, bands at the start, middle and end, of
// a matrix and of a stack of matrices (nvfp4's scale per matrix).
func TestDequantRows(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(43, 44))
	for _, m := range []codecs.Matrix{{Rows: 37, K: 160}, {Rows: 36, K: 160, Mats: 4}} {
		R := m.Rows
		bands := [][2]int64{{0, R}, {0, 1}, {5, 1}, {11, 20}, {R - 1, 1}, {R - 7, 7}, {17, 0}, {8, 10}}
		for _, fd := range gatherFormats {
			encs := map[string][]byte{"random bytes": randomTensor(t, rng, fd.f, fd.dt, m)}
			if fd.f != codecs.Raw {
				encs["encoded"] = encodeFormatWith(t, rng, fd.f, m, codecs.Search, []float64{1, 30, 0.01, 5})
			}
			for what, enc := range encs {
				eb := uploadTensor(t, ops, fd.f, fd.dt, m, enc)
				ob, err := d.Alloc(4 * (m.Elements() + 1))
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range bands {
					r0, n := b[0], b[1]
					want := make([]float32, n*m.K)
					if err := codecs.DecodeRows(fd.f, fd.dt, m, enc, r0, n, want); err != nil {
						t.Fatal(err)
					}
					tail := []float32{-5}
					if err := ob.UploadAt(4*n*m.K, Bytes(tail)); err != nil {
						t.Fatal(err)
					}
					if err := ops.DequantRows(ob.Ptr(), eb.Ptr(), fd.f, fd.dt, m, r0, n); err != nil {
						t.Fatalf("%s %s rows %d+%d: %v", fd.f, fd.dt, r0, n, err)
					}
					got := download[float32](t, ob, int(n*m.K)+1)
					compareBits(t, fmt.Sprintf("%s %s %d×%d/%d %s rows %d+%d", fd.f, fd.dt, m.Rows, m.K, m.Matrices(), what, r0, n), got[:n*m.K], want, false)
					if got[n*m.K] != -5 {
						t.Errorf("%s %s rows %d+%d: wrote past the band", fd.f, fd.dt, r0, n)
					}
				}
				if err := ops.DequantRows(ob.Ptr(), eb.Ptr(), fd.f, fd.dt, m, R-7, 8); err == nil {
					t.Errorf("%s %s: rows %d+8 of %d accepted", fd.f, fd.dt, R-7, R)
				}
				eb.Free()
				ob.Free()
			}
		}
	}
}

// TestAttentionLarge compares Attention on the GPU with the CPU backend at
// shapes larger than the conformance suite's (several tiles of queries and
// keys, a KV cache of ~2k rows, a sliding window), under the suite's bound
// |out − ref| ≤ 2e-6·(1 + S)·max|v| (runtime/backendtest.AttentionRel).
func TestAttentionLarge(t *testing.T) {
	d, _ := device(t)
	b := Backend(d)
	defer b.Close()
	ref := cpu.New(0)
	rng := rand.New(rand.NewPCG(45, 46))
	for _, a := range []api.AttentionShape{
		{Rows: 96, Heads: 16, KVHeads: 2, HeadDim: 512, Causal: true, QueryPos: 1900},
		{Rows: 200, Heads: 16, KVHeads: 8, HeadDim: 256, Causal: true, QueryPos: 1000, KeyStart: 300, Window: 512},
		{Rows: 600, Heads: 8, KVHeads: 4, HeadDim: 64, Causal: true, QueryPos: 100, Window: 300}, // several causal chunks on the GEMM path
		{Rows: 130, Heads: 16, KVHeads: 2, HeadDim: 512, KeyStart: 7, KeyEnd: 1100},
		{Rows: 65, Heads: 6, KVHeads: 3, HeadDim: 72, KeyStart: 0, KeyEnd: 129},
	} {
		name := fmt.Sprintf("%+v", a)
		hd := a.HeadDim
		qw, kw := a.Heads*hd, a.KVHeads*hd
		end := a.KeyEnd
		if a.Causal {
			end = a.QueryPos + a.Rows
		}
		q := make([]float32, a.Rows*qw)
		k := make([]float32, end*kw)
		v := make([]float32, end*kw)
		for i := range q {
			q[i] = float32(rng.NormFloat64() * 3 / math.Sqrt(float64(hd)))
		}
		for i := range k {
			k[i], v[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		run := func(be api.Backend) []float32 {
			bufs := make([]api.Buf, 4)
			for i, x := range [][]float32{make([]float32, len(q)), q, k, v} {
				buf, err := be.Alloc(len(x))
				if err != nil {
					t.Fatal(err)
				}
				if err := be.Upload(buf, x); err != nil {
					t.Fatal(err)
				}
				bufs[i] = buf
			}
			if err := be.Attention(bufs[0], bufs[1], bufs[2], bufs[3], a); err != nil {
				t.Fatalf("%s: %s: %v", be.Name(), name, err)
			}
			out := make([]float32, len(q))
			if err := be.Download(bufs[0], out); err != nil {
				t.Fatal(err)
			}
			for _, buf := range bufs {
				buf.Free()
			}
			return out
		}
		want, got := run(ref), run(b)
		group := a.Heads / a.KVHeads
		worst, bad := 0.0, 0
		for tq := range a.Rows {
			lo, hi := a.KeyStart, a.KeyEnd
			if a.Causal {
				p := a.QueryPos + tq
				hi = p + 1
				if a.Window > 0 {
					lo = max(lo, p-a.Window+1)
				}
			}
			for h := range a.Heads {
				g := (h / group) * hd
				var smax, vmax float64
				for j := lo; j < hi; j++ {
					var s float64
					for e, x := range k[j*kw+g : j*kw+g+hd] {
						s += math.Abs(float64(q[tq*qw+h*hd+e]) * float64(x))
						vmax = max(vmax, math.Abs(float64(v[j*kw+g+e])))
					}
					smax = max(smax, s)
				}
				scale := (1 + smax) * vmax
				for e := range hd {
					i := tq*qw + h*hd + e
					err := math.Abs(float64(got[i]) - float64(want[i]))
					worst = max(worst, err/scale)
					if !(err <= 2e-6*scale) {
						if bad < 5 {
							t.Errorf("%s: out[%d][head %d][%d] = %g, want %g", name, tq, h, e, got[i], want[i])
						}
						bad++
					}
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d values off", name, bad)
		}
		t.Logf("%s: worst error %.3g of (1+S)·max|v|", name, worst)
	}
}

// randBuf allocates n values on b filled from gen.
func randBuf(t *testing.T, b api.Backend, n int, gen func() float32) api.Buf {
	t.Helper()
	v := make([]float32, n)
	for i := range v {
		v[i] = gen()
	}
	buf, err := b.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(buf, v); err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestOpsRealShapes times the ops at the real model's shapes (hidden 2816,
// canvas 256, vocabulary 262144, head dims 256 and 512) and logs the times;
// it checks nothing but that they run.
func TestOpsRealShapes(t *testing.T) {
	d, _ := device(t)
	b := Backend(d)
	defer b.Close()
	rng := rand.New(rand.NewPCG(47, 48))
	norm := func() float32 { return float32(rng.NormFloat64()) }
	const H, C, V = 2816, 256, 262144

	for _, a := range []api.AttentionShape{
		{Rows: C, Heads: 16, KVHeads: 2, HeadDim: 512, KeyStart: 0, KeyEnd: 2048 + C},
		{Rows: C, Heads: 16, KVHeads: 8, HeadDim: 256, KeyStart: 2048 + C - 1024, KeyEnd: 2048 + C},
		{Rows: 1024, Heads: 16, KVHeads: 2, HeadDim: 512, Causal: true, QueryPos: 1024},
		{Rows: 1024, Heads: 16, KVHeads: 8, HeadDim: 256, Causal: true, QueryPos: 1024, Window: 1024},
	} {
		end := a.KeyEnd
		if a.Causal {
			end = a.QueryPos + a.Rows
		}
		qw, kw := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
		q := randBuf(t, b, a.Rows*qw, func() float32 { return norm() / 16 })
		k, v := randBuf(t, b, end*kw, norm), randBuf(t, b, end*kw, norm)
		out, err := b.Alloc(a.Rows * qw)
		if err != nil {
			t.Fatal(err)
		}
		dt := moeTime(t, b, 1, 5, func() error { return b.Attention(out, q, k, v, a) })
		keys := float64(end - a.KeyStart) // computed tiles: about half of it when causal
		t.Logf("Attention %+v: %v (%.0f GFLOP/s counting every key of the span)", a, dt,
			4*float64(a.Rows)*float64(a.Heads)*keys*float64(a.HeadDim)/dt.Seconds()/1e9)
		for _, x := range []api.Buf{q, k, v, out} {
			x.Free()
		}
	}

	// SoftEmbed over a quarter of the vocabulary (times 4 for the real one),
	// raw bf16 and q4 tables.
	const Vq = V / 4
	src := make([]float32, Vq*H)
	for i := range src {
		src[i] = norm() * 0.05
	}
	logits := randBuf(t, b, C*Vq, func() float32 { return norm() * 3 })
	soft, err := b.Alloc(C * H)
	if err != nil {
		t.Fatal(err)
	}
	m := codecs.Matrix{Rows: Vq, K: H}
	for _, f := range []codecs.Format{codecs.Raw, codecs.Q4} {
		dt := codecs.BF16
		var enc []byte
		if f == codecs.Raw {
			enc = make([]byte, 2*len(src))
			for i, x := range src {
				hi := math.Float32bits(x) >> 16 // bf16 by truncation, little-endian
				enc[2*i], enc[2*i+1] = byte(hi), byte(hi>>8)
			}
		} else {
			if enc, _, err = codecs.EncodeTensor(f, codecs.F32, m, codecs.Search, Bytes(src)); err != nil {
				t.Fatal(err)
			}
			dt = codecs.F32
		}
		w, err := b.UploadWeight(api.TensorData{Name: "embed", Format: f, DType: dt, Shape: []int64{Vq, H}, Bytes: enc})
		if err != nil {
			t.Fatal(err)
		}
		el := moeTime(t, b, 1, 2, func() error { return b.SoftEmbed(soft, logits, C, w, 53.07) })
		t.Logf("SoftEmbed %d rows over a %d×%d %s table: %v (%.0f GFLOP/s)", C, Vq, H, f, el, 2*float64(C)*Vq*H/el.Seconds()/1e9)
		ids := randBuf(t, b, C, func() float32 { return float32(rng.IntN(Vq)) })
		emb, err := b.Alloc(C * H)
		if err != nil {
			t.Fatal(err)
		}
		el = moeTime(t, b, 1, 20, func() error { return b.Embed(emb, w, ids, C, 53.07) })
		t.Logf("Embed %d rows of a %s table: %v", C, f, el)
		ids.Free()
		emb.Free()
		w.Free()
	}
	logits.Free()
	soft.Free()

	x, y := randBuf(t, b, C*H, norm), randBuf(t, b, C*H, norm)
	t.Logf("AddScale %d: %v", C*H, moeTime(t, b, 1, 50, func() error { return b.AddScale(x, y, C*H, 1) }))
	g, u := randBuf(t, b, C*4*H, norm), randBuf(t, b, C*4*H, norm)
	t.Logf("GeluMul %d: %v", C*4*H, moeTime(t, b, 1, 50, func() error { return b.GeluMul(g, u, C*4*H) }))
	inv := randBuf(t, b, 256, func() float32 { return rng.Float32() })
	qr := randBuf(t, b, C*16*512, norm)
	t.Logf("RoPE %d×16×512: %v", C, moeTime(t, b, 1, 50, func() error { return b.RoPE(qr, C, 16, 512, 1000, inv) }))
	for _, z := range []api.Buf{x, y, g, u, inv, qr} {
		z.Free()
	}

	lg := randBuf(t, b, C*V, func() float32 { return float32(30*math.Tanh(rng.NormFloat64()*0.3)) / 0.8 })
	out, err := b.Alloc(C)
	if err != nil {
		t.Fatal(err)
	}
	us := make([]float64, C)
	for i := range us {
		us[i] = rng.Float64()
	}
	t.Logf("Temper %d×%d: %v", C, V, moeTime(t, b, 1, 10, func() error { return b.Temper(lg, C*V, 1) }))
	t.Logf("Categorical %d×%d: %v", C, V, moeTime(t, b, 1, 10, func() error { return b.Categorical(out, lg, C, V, us) }))
	lg.Free()
	out.Free()
}
