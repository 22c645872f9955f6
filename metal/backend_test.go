//go:build linux

package metal

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// The backend's own behaviour beyond the conformance suite, on the host
// engine.

// encodeTensor encodes random values of shape (the last dimension K, the
// others flattened into rows; a 3-D shape is a stack of matrices) in format
// f from bf16, as a pack stores them.
func encodeTensor(t *testing.T, rng *rand.Rand, f codecs.Format, shape []int64) backend.TensorData {
	t.Helper()
	g, err := codecs.FlattenShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 2*g.Elements())
	for i := range g.Elements() {
		u := math.Float32bits(float32(rng.NormFloat64()*math.Exp(rng.NormFloat64()))) >> 16
		raw[2*i], raw[2*i+1] = byte(u), byte(u>>8)
	}
	enc := raw
	if f != codecs.Raw {
		if enc, _, err = codecs.EncodeTensor(f, codecs.BF16, g, codecs.Search, raw); err != nil {
			t.Fatal(err)
		}
	}
	return backend.TensorData{Name: fmt.Sprintf("%s%v", f, shape), Format: f, DType: codecs.BF16, Shape: shape, Bytes: enc}
}

// TestUploadChunks: the re-lay at upload stages the pack in chunks of whole
// rows (here 100 bytes, so every chunk is a row or a few, and nvfp4 stacks
// cross matrices within and between chunks); each format's weight then
// decodes bit for bit as codecs.DecodeRows decodes the pack.
func TestUploadChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	b := hostBackend(t, HostOptions{})
	b.(*metalBackend).chunk = 100
	for _, c := range []struct {
		f     codecs.Format
		shape []int64
	}{
		{codecs.Q4, []int64{9, 64}}, {codecs.Q5, []int64{7, 96}}, {codecs.Q6, []int64{5, 160}},
		{codecs.Q8, []int64{11, 40}}, {codecs.NVFP4, []int64{3, 5, 32}}, {codecs.NVFP4, []int64{4, 1, 64}},
		{codecs.Raw, []int64{6, 30}},
	} {
		td := encodeTensor(t, rng, c.f, c.shape)
		t.Run(td.Name, func(t *testing.T) {
			g, _ := td.Matrix()
			want := make([]float32, g.Elements())
			if err := codecs.DecodeRows(td.Format, td.DType, g, td.Bytes, 0, g.Rows, want); err != nil {
				t.Fatal(err)
			}
			w, err := b.UploadWeight(td)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Free()
			out, err := b.Alloc(len(want))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			if err := b.Dequant(out, w); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(want))
			if err := b.Download(out, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("[%d] = %g, want %g", i, got[i], want[i])
				}
			}
		})
	}
}

// TestBackendRefusals: buffers and weights of another backend, freed ones,
// a truncated tensor and a closed backend are refused, each with its
// sentinel.
func TestBackendRefusals(t *testing.T) {
	b := hostBackend(t, HostOptions{})
	other := cpu.New(1)
	defer other.Close()
	x, _ := b.Alloc(8)
	y, _ := b.Alloc(8)
	ob, _ := other.Alloc(8)
	freed, _ := b.Alloc(8)
	freed.Free()
	big, _ := b.Alloc(64)
	defer big.Free()
	td := encodeTensor(t, rand.New(rand.NewPCG(53, 54)), codecs.Q4, []int64{2, 32})
	w, err := b.UploadWeight(td)
	if err != nil {
		t.Fatal(err)
	}
	fw, _ := b.UploadWeight(td)
	fw.Free()
	bad := td
	bad.Bytes = bad.Bytes[:len(bad.Bytes)-1]
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"another backend's buffer", b.AddScale(x, ob, 8, 1), ErrArgument},
		{"a freed buffer", b.AddScale(x, freed, 8, 1), ErrArgument},
		{"a freed weight", b.Dequant(big, fw), ErrArgument},
		{"upload past the end", b.Upload(x, make([]float32, 9)), ErrArgument},
		{"download past the end", b.Download(y, make([]float32, 9)), ErrArgument},
		{"no values", func() error { _, err := b.Alloc(0); return err }(), ErrArgument},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if _, err := b.UploadWeight(bad); err == nil {
		t.Error("a truncated tensor uploaded")
	}
	caps := b.Caps()
	if caps.Device != b.(*metalBackend).e.Name() || caps.Host || len(caps.Resident) != 6 || caps.Kernels["attention"] != kernelAttention {
		t.Errorf("Caps = %+v", caps)
	}
	w.Free()
	x.Free()
	y.Free()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(4); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := b.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestRecordRoutes: a recorded MoE call reports each row's experts in slot
// order, the CPU's selection wherever the CPU's margin is not a near tie, and
// recording changes no result.
func TestRecordRoutes(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	const E, K, H, F, rows = 8, 2, 32, 16, 9
	type run struct {
		routes backend.Routes
		out    []float32
	}
	weights := []backend.TensorData{
		encodeTensor(t, rng, codecs.Raw, []int64{E, H}), encodeTensor(t, rng, codecs.Q4, []int64{E * 2 * F, H}),
		encodeTensor(t, rng, codecs.Raw, []int64{E * H, F}),
	}
	vec := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return v
	}
	u, x, rscale, pes := vec(rows*H, -1, 1), vec(rows*H, -2, 2), vec(H, 0.5, 2), vec(E, 0.5, 2)
	moe := func(b backend.Backend, record bool) run {
		t.Helper()
		var ws [3]backend.Weight
		for i, td := range weights {
			w, err := b.UploadWeight(td)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Free()
			ws[i] = w
		}
		bufs := make([]backend.Buf, 5)
		for i, v := range [][]float32{make([]float32, rows*H), u, x, rscale, pes} {
			var err error
			if bufs[i], err = b.Alloc(len(v)); err != nil {
				t.Fatal(err)
			}
			defer bufs[i].Free()
			if err := b.Upload(bufs[i], v); err != nil {
				t.Fatal(err)
			}
		}
		var r run
		if record {
			b.(backend.RouteRecorder).RecordRoutes(&r.routes)
			defer b.(backend.RouteRecorder).RecordRoutes(nil)
		}
		if err := b.MoE(bufs[0], bufs[1], bufs[2], rows, backend.MoEWeights{Router: ws[0], RouterScale: bufs[3],
			PerExpertScale: bufs[4], RouterRoot: 0.2, Eps: 1e-6, GateUp: ws[1], Down: ws[2], TopK: K}); err != nil {
			t.Fatal(err)
		}
		r.out = make([]float32, rows*H)
		if err := b.Download(bufs[0], r.out); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ref := cpu.New(1)
	defer ref.Close()
	want := moe(ref, true)
	b := hostBackend(t, HostOptions{})
	plain, recorded := moe(b, false), moe(b, true)
	for i := range plain.out {
		if math.Float32bits(plain.out[i]) != math.Float32bits(recorded.out[i]) {
			t.Fatalf("recording changed out[%d]: %g, %g", i, recorded.out[i], plain.out[i])
		}
	}
	if len(recorded.routes.Calls) != 1 || recorded.routes.Calls[0].Rows != rows || recorded.routes.Calls[0].K != K {
		t.Fatalf("recorded %+v", recorded.routes.Calls)
	}
	got, cpuCall := recorded.routes.Calls[0], want.routes.Calls[0]
	compared := 0
	for r := range rows {
		if cpuCall.Margins[r] < 1e-5 {
			continue // a near tie: either selection is right
		}
		compared++
		for j := range K {
			if got.Row(r)[j] != cpuCall.Row(r)[j] {
				t.Errorf("row %d: experts %v, the CPU's %v", r, got.Row(r), cpuCall.Row(r))
				break
			}
		}
	}
	if compared == 0 {
		t.Error("every row is a near tie")
	}
}
