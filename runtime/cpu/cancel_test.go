package cpu

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// bf16Weight uploads a rows × k bf16 matrix of small values.
func bf16Weight(t *testing.T, b *Backend, rows, k int) backend.Weight {
	t.Helper()
	raw := make([]byte, 2*rows*k)
	for i := 0; i < len(raw); i += 2 {
		v := math.Float32bits(float32(math.Sin(float64(i))) / 8)
		raw[i], raw[i+1] = byte(v>>16), byte(v>>24)
	}
	w, err := b.UploadWeight(backend.TensorData{Name: "w", Format: codecs.Raw, DType: codecs.BF16, Shape: []int64{int64(rows), int64(k)}, Bytes: raw})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// buf uploads n values.
func buf(t *testing.T, b *Backend, n int) backend.Buf {
	t.Helper()
	x, err := b.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Cos(float64(i))) * 3
	}
	if err := b.Upload(x, v); err != nil {
		t.Fatal(err)
	}
	return x
}

// A long product or soft embedding stops within milliseconds of its context
// being canceled, with an error wrapping context.Canceled; ops end so too
// when the context is done before them. The same ops under a live context,
// or after SetContext(nil), give the results they give without one.
func TestSetContextInterruptsLongOps(t *testing.T) {
	b := New(0)
	const V, K, T = 32768, 1024, 64 // 2·10⁹ multiply-adds: about a second on two cores
	w := bf16Weight(t, b, V, K)
	x, y := buf(t, b, T*K), buf(t, b, T*V)
	soft := buf(t, b, T*K)
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"MatMulNT", func() error { return b.MatMulNT(y, x, w, T) }},
		{"SoftEmbed", func() error { return b.SoftEmbed(soft, y, T, w, 1) }},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		b.SetContext(ctx)
		var canceled time.Time
		timer := time.AfterFunc(50*time.Millisecond, func() { canceled = time.Now(); cancel() })
		err := op.run()
		stopped := time.Now()
		timer.Stop()
		b.SetContext(nil)
		cancel()
		switch {
		case canceled.IsZero():
			t.Logf("%s: finished in under 50 ms, before the cancellation", op.name)
		case !errors.Is(err, context.Canceled):
			t.Errorf("%s canceled: err %v", op.name, err)
		case stopped.Sub(canceled) > 250*time.Millisecond:
			t.Errorf("%s stopped %v after its context was canceled", op.name, stopped.Sub(canceled))
		default:
			t.Logf("%s stopped %v after the cancellation", op.name, stopped.Sub(canceled))
		}
	}

	// Small shapes: every long op refuses a done context, and computes as
	// before under a live one and without one.
	const v, k, n = 64, 32, 4
	sw := bf16Weight(t, b, v, k)
	sx, sl := buf(t, b, n*k), buf(t, b, n*v)
	sout, ent, amax, draw := buf(t, b, n*v), buf(t, b, n), buf(t, b, n), buf(t, b, n)
	us := []float64{0.1, 0.5, 0.7, 0.99}
	ops := []struct {
		name string
		run  func() error
		out  backend.Buf
	}{
		{"MatMulNT", func() error { return b.MatMulNT(sout, sx, sw, n) }, sout},
		{"SoftEmbed", func() error { return b.SoftEmbed(sout, sl, n, sw, 2) }, sout},
		{"Attention", func() error {
			return b.Attention(sout, sx, sx, sx, backend.AttentionShape{Rows: n, Heads: 1, KVHeads: 1, HeadDim: k, KeyEnd: n})
		}, sout},
		{"Softcap", func() error { // in place: on a fresh copy each time
			if err := b.Copy(sout, 0, sl, 0, n*v); err != nil {
				return err
			}
			return b.Softcap(sout, n*v, 30)
		}, sout},
		{"RowStats", func() error { return b.RowStats(sl, n, v, 0.8, ent, amax) }, ent},
		{"Categorical", func() error { return b.Categorical(draw, sl, n, v, us) }, draw},
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, op := range ops {
		result := func() []float32 {
			if err := op.run(); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			got := make([]float32, op.out.Len())
			if err := b.Download(op.out, got); err != nil {
				t.Fatal(err)
			}
			return got
		}
		b.SetContext(nil)
		want := result()
		b.SetContext(t.Context())
		live := result()
		b.SetContext(done)
		err := op.run()
		b.SetContext(nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s under a done context: err %v", op.name, err)
		}
		if after := result(); !slices.Equal(live, want) || !slices.Equal(after, want) {
			t.Errorf("%s: results differ under a live context or after SetContext(nil)", op.name)
		}
	}
}
