package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	api "github.com/dgq-dev/dgq/runtime/backend"
)

var (
	devOnce sync.Once
	testDev *Device
	testErr error
	testOps *Ops
)

// device opens the device once for the package's tests, or skips the test
// where CUDA is unavailable.
func device(t testing.TB) (*Device, *Ops) {
	t.Helper()
	devOnce.Do(func() {
		testDev, testErr = Open()
		if testErr == nil {
			// A fresh cache per run: compiles are measured, not replayed.
			dir, err := os.MkdirTemp("", "dgq-cuda-cache-")
			if err != nil {
				testErr = err
				return
			}
			testDev.SetCacheDir(dir)
			testOps = NewOps(testDev)
		}
	})
	if errors.Is(testErr, ErrUnavailable) {
		t.Skipf("no GPU: %v", testErr)
	}
	if testErr != nil {
		t.Fatal(testErr)
	}
	return testDev, testOps
}

// freeAll frees buffers (errors ignored: the test's checks are done).
func freeAll(bufs ...interface{ Free() error }) {
	for _, b := range bufs {
		b.Free()
	}
}

// mustBackend is NewBackend, or the test's end.
func mustBackend(t testing.TB, d *Device, o Options) api.Backend {
	t.Helper()
	b, err := NewBackend(d, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testDev != nil {
		dir := testDev.CacheDir()
		if err := testOps.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing ops:", err)
			code = 1
		}
		if err := testDev.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing device:", err)
			code = 1
		}
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func TestUnavailableOneLine(t *testing.T) {
	_, _, err := openLib([]string{"libdgq-no-such-library.so.9"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("missing library: %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("missing library: message has several lines: %q", err)
	}
	t.Logf("missing library: %v", err)

	d, err := Open()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Open: %v, want ErrUnavailable", err)
		}
		if strings.Contains(err.Error(), "\n") || err.Error() == "" {
			t.Errorf("Open: not one line: %q", err)
		}
		t.Logf("Open: %v", err)
		return
	}
	t.Logf("Open succeeded on %s", d.Name())
	if err := d.Close(); err != nil {
		t.Error(err)
	}
}

func TestInfo(t *testing.T) {
	d, _ := device(t)
	major, minor := d.Capability()
	free, total, err := d.FreeMemory()
	if err != nil {
		t.Fatal(err)
	}
	nm, nn, err := NVRTCVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device %q, compute capability %d.%d (%s), %d SMs, %.1f GiB (%.1f GiB free), driver CUDA %d, NVRTC %d.%d",
		d.Name(), major, minor, d.Arch(), d.Multiprocessors(), float64(total)/(1<<30), float64(free)/(1<<30), d.DriverVersion(), nm, nn)
	if total == 0 || d.TotalMemory() != total || d.Name() == "" {
		t.Errorf("implausible device info")
	}
}

func TestRoundTrip(t *testing.T) {
	d, _ := device(t)
	const n = 1<<20 + 3
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	b, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	if err := b.Upload(src); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := b.Download(got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("download differs from upload")
	}
	// Offsets, a device-to-device copy and zeroing.
	if err := b.UploadAt(5, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	part := make([]byte, 5)
	if err := b.DownloadAt(3, part); err != nil {
		t.Fatal(err)
	}
	if want := []byte{src[3], src[4], 1, 2, 3}; !bytes.Equal(part, want) {
		t.Errorf("DownloadAt = %v, want %v", part, want)
	}
	c, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	if err := c.CopyFrom(0, b, 0, n); err != nil {
		t.Fatal(err)
	}
	if err := c.DownloadAt(0, got); err != nil {
		t.Fatal(err)
	}
	if got[5] != 1 || !bytes.Equal(got[8:], src[8:]) {
		t.Error("device-to-device copy differs")
	}
	if err := c.Zero(); err != nil {
		t.Fatal(err)
	}
	if err := c.Download(got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, n)) {
		t.Error("Zero left non-zero bytes")
	}
	if err := b.UploadAt(n-1, []byte{1, 2}); err == nil {
		t.Error("upload past the end accepted")
	}
}

const addSrc = `extern "C" __global__ void add_scalar(float* x, float v, unsigned n) {
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += v;
}
`

func TestCompileCache(t *testing.T) {
	d, _ := device(t)
	old := d.CacheDir()
	defer d.SetCacheDir(old)
	d.SetCacheDir(t.TempDir())

	m1, err := d.Compile("add.cu", addSrc)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	if m1.Cached {
		t.Error("first compile read the cache")
	}
	m2, err := d.Compile("add.cu", addSrc)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if !m2.Cached || m2.Key != m1.Key {
		t.Errorf("second compile: cached %v, keys %s / %s", m2.Cached, m1.Key, m2.Key)
	}
	m3, err := d.Compile("add.cu", addSrc, "-DUNUSED=1")
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Close()
	if m3.Cached || m3.Key == m1.Key {
		t.Error("other options hit the same cache entry")
	}

	const n = 1000
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	buf, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := buf.Upload(Bytes(x)); err != nil {
		t.Fatal(err)
	}
	if err := m2.Launch("add_scalar", [3]uint32{(n + 127) / 128, 1, 1}, [3]uint32{128, 1, 1}, 0, buf, float32(0.5), uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := buf.Download(Bytes(got)); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != float32(i)+0.5 {
			t.Fatalf("x[%d] = %g, want %g", i, got[i], float32(i)+0.5)
		}
	}
	if err := m2.Launch("no_such_kernel", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0); err == nil || !strings.Contains(err.Error(), "cuModuleGetFunction") {
		t.Errorf("missing kernel: %v", err)
	}
	if err := m2.Launch("add_scalar", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, buf, 0.5, n); err == nil {
		t.Error("untyped float64/int arguments accepted for float/unsigned")
	}

	_, err = d.Compile("bad.cu", "extern \"C\" __global__ void k() { undeclared_thing = 1; }")
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undeclared_thing") {
		t.Errorf("bad source: %v, want a CompileError with the log", err)
	} else {
		t.Logf("compile error reported as: %v", err)
	}
}

func TestKernelsCompile(t *testing.T) {
	d, _ := device(t)
	for _, f := range KernelFiles() {
		m, err := d.CompileKernel(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		m.Close()
	}
}

// rmsNormRef is the CPU reference (runtime's rmsNorm).
func rmsNormRef(x, w, out []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v * v)
	}
	ms := float32(ss)/float32(len(x)) + eps
	inv := 1 / float32(math.Sqrt(float64(ms)))
	for i, v := range x {
		if w == nil {
			out[i] = v * inv
		} else {
			out[i] = float32(v*inv) * w[i]
		}
	}
}

func upload[T any](t *testing.T, d *Device, s []T) *Buffer {
	t.Helper()
	b, err := d.Alloc(int64(len(Bytes(s))))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(Bytes(s)); err != nil {
		t.Fatal(err)
	}
	return b
}

func download[T any](t *testing.T, b *Buffer, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := b.Download(Bytes(out)); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRMSNorm(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var worst float64
	for _, sh := range []struct{ rows, n int }{{1, 1}, {3, 100}, {7, 2816}, {4, 5000}, {2, 256}, {1, 21504}} {
		for _, scaled := range []bool{true, false} {
			x := make([]float32, sh.rows*sh.n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
			}
			var w []float32
			if scaled {
				w = make([]float32, sh.n)
				for i := range w {
					w[i] = float32(rng.NormFloat64())
				}
			}
			const eps = 1e-6
			want := make([]float32, len(x))
			for r := 0; r < sh.rows; r++ {
				rmsNormRef(x[r*sh.n:(r+1)*sh.n], w, want[r*sh.n:(r+1)*sh.n], eps)
			}
			xb := upload(t, d, x)
			yb, err := d.Alloc(int64(4 * len(x)))
			if err != nil {
				t.Fatal(err)
			}
			var wp Ptr
			var wb *Buffer
			if scaled {
				wb = upload(t, d, w)
				wp = wb.Ptr()
			}
			if err := ops.RMSNorm(yb.Ptr(), xb.Ptr(), wp, sh.rows, sh.n, eps); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, yb, len(x))
			for i := range got {
				e := math.Abs(float64(got[i]) - float64(want[i]))
				rel := e / math.Max(math.Abs(float64(want[i])), 1e-30)
				if e > 0 {
					worst = math.Max(worst, rel)
				}
				if e > 1e-5*math.Abs(float64(want[i])) {
					t.Fatalf("%d×%d scaled=%v: y[%d] = %g, want %g (rel %.2g)", sh.rows, sh.n, scaled, i, got[i], want[i], rel)
				}
			}
			xb.Free()
			yb.Free()
			if wb != nil {
				wb.Free()
			}
		}
	}
	t.Logf("RMSNorm: worst relative error %.3g", worst)
}

// encodeQ4 encodes random rows (scaled per row, offset per group) to q4.
func encodeQ4(t *testing.T, rng *rand.Rand, m codecs.Matrix) []byte {
	t.Helper()
	src := make([]float32, m.Elements())
	for r := int64(0); r < m.Rows; r++ {
		scale := math.Exp(3 * rng.NormFloat64())
		for g := int64(0); g < m.K/32; g++ {
			off := rng.NormFloat64() * scale * 0.5
			for j := int64(0); j < 32; j++ {
				src[r*m.K+g*32+j] = float32(off + rng.NormFloat64()*scale)
			}
		}
	}
	enc, _, err := codecs.EncodeTensor(codecs.Q4, codecs.F32, m, codecs.Search, Bytes(src))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func TestDequantQ4(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, m := range []codecs.Matrix{{Rows: 1, K: 32}, {Rows: 3, K: 64}, {Rows: 5, K: 96}, {Rows: 17, K: 2816}, {Rows: 64, K: 4096}, {Rows: 1000, K: 704}} {
		for _, kind := range []string{"encoded", "random bytes"} {
			var enc []byte
			if kind == "encoded" {
				enc = encodeQ4(t, rng, m)
			} else {
				size, _ := codecs.Q4.EncodedSize(codecs.F32, m)
				enc = make([]byte, size)
				for i := range enc {
					enc[i] = byte(rng.Uint32())
				}
			}
			want := make([]float32, m.Elements())
			if err := codecs.DecodeRows(codecs.Q4, codecs.F32, m, enc, 0, m.Rows, want); err != nil {
				t.Fatal(err)
			}
			eb := uploadTensor(t, ops, codecs.Q4, codecs.F32, m, enc)
			ob, err := d.Alloc(4 * m.Elements())
			if err != nil {
				t.Fatal(err)
			}
			if err := ops.DequantQ4(ob.Ptr(), eb.Ptr(), codecs.F32, m); err != nil {
				t.Fatal(err)
			}
			got := download[float32](t, ob, int(m.Elements()))
			bad := 0
			for i := range got {
				if !sameBits(got[i], want[i]) {
					if bad < 5 {
						t.Errorf("%d×%d %s: [%d] = %g (%#08x), want %g (%#08x)", m.Rows, m.K, kind, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d×%d %s: %d of %d values differ", m.Rows, m.K, kind, bad, len(got))
			}
			eb.Free()
			ob.Free()
		}
	}
}

func TestWidenBF16(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 100003
	src := make([]uint16, n)
	for i := range src {
		src[i] = uint16(rng.Uint32())
	}
	sb := upload(t, d, src)
	defer sb.Free()
	ob, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Free()
	if err := ops.WidenBF16(ob.Ptr(), sb.Ptr(), n); err != nil {
		t.Fatal(err)
	}
	got := download[uint32](t, ob, n)
	for i, v := range got {
		if v != uint32(src[i])<<16 {
			t.Fatalf("[%d] = %#08x, want %#08x", i, v, uint32(src[i])<<16)
		}
	}
}

func TestSgemm(t *testing.T) {
	d, _ := device(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, sh := range []struct{ m, n, k int }{{1, 1, 1}, {33, 65, 129}, {256, 512, 1024}, {7, 2816, 704}} {
		a := make([]float32, sh.m*sh.k)
		b := make([]float32, sh.n*sh.k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		ab, bb := upload(t, d, a), upload(t, d, b)
		cb, err := d.Alloc(int64(4 * sh.m * sh.n))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.MatMulNT(cb.Ptr(), ab.Ptr(), bb.Ptr(), sh.m, sh.n, sh.k); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, cb, sh.m*sh.n)
		var worst float64
		for i := 0; i < sh.m; i++ {
			for j := 0; j < sh.n; j++ {
				var s, mag float64
				for p := 0; p < sh.k; p++ {
					v := float64(a[i*sh.k+p]) * float64(b[j*sh.k+p])
					s += v
					mag += math.Abs(v)
				}
				e := math.Abs(float64(got[i*sh.n+j])-s) / mag
				worst = math.Max(worst, e)
				if e > 1e-4 {
					t.Fatalf("%v: C[%d][%d] = %g, want %g", sh, i, j, got[i*sh.n+j], s)
				}
			}
		}
		t.Logf("SGEMM %d×%d×%d: worst error %.3g of Σ|a·b|", sh.m, sh.n, sh.k, worst)
		freeAll(ab, bb, cb)
	}
}

func TestGemmExBF16(t *testing.T) {
	d, _ := device(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const m, n, k = 64, 96, 2816
	a := make([]uint16, m*k)
	b := make([]uint16, n*k)
	for i := range a {
		a[i] = uint16(math.Float32bits(float32(rng.NormFloat64())) >> 16)
	}
	for i := range b {
		b[i] = uint16(math.Float32bits(float32(rng.NormFloat64())) >> 16)
	}
	ab, bb := upload(t, d, a), upload(t, d, b)
	defer ab.Free()
	defer bb.Free()
	cb, err := d.Alloc(4 * m * n)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Free()
	// Row-major C = A·Bᵀ as in MatMulNT, with bf16 inputs and f32 output.
	if err := d.GemmEx(true, false, n, m, k, 1, bb.Ptr(), R16BF, k, ab.Ptr(), R16BF, k, 0, cb.Ptr(), R32F, n); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, cb, m*n)
	bf := func(u uint16) float64 { return float64(math.Float32frombits(uint32(u) << 16)) }
	var worst float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, mag float64
			for p := 0; p < k; p++ {
				v := bf(a[i*k+p]) * bf(b[j*k+p])
				s += v
				mag += math.Abs(v)
			}
			e := math.Abs(float64(got[i*n+j])-s) / mag
			worst = math.Max(worst, e)
			if e > 1e-4 {
				t.Fatalf("C[%d][%d] = %g, want %g", i, j, got[i*n+j], s)
			}
		}
	}
	t.Logf("GemmEx bf16 %d×%d×%d: worst error %.3g of Σ|a·b|", m, n, k, worst)
}
