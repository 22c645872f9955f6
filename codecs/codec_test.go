package codecs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

var allDTypes = []DType{BF16, F16, F32}

// gaussSource returns n N(0, 0.02) values rounded to dt, as bytes.
func gaussSource(seed uint64, dt DType, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	return fromFloat32(dt, x)
}

// decodeStats decodes the whole tensor with DecodeRows and compares it with
// the source independently of the encoder.
func decodeStats(t *testing.T, f Format, dt DType, m Matrix, enc, src []byte) (Stats, []float32) {
	t.Helper()
	dec := make([]float32, m.Elements())
	if err := DecodeRows(f, dt, m, enc, 0, m.Rows, dec); err != nil {
		t.Fatal(err)
	}
	ref := make([]float32, m.Elements())
	if err := ToFloat32(dt, src, ref); err != nil {
		t.Fatal(err)
	}
	var st Stats
	for i := range dec {
		st.add(dec[i], ref[i])
	}
	return st, dec
}

func closeRel(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }

func TestRoundTrip(t *testing.T) {
	bound := map[Format]float64{Raw: 0, Q8: 0.012, Q6: 0.022, Q5: 0.042, Q4: 0.08, NVFP4: 0.1}
	shapes := []Matrix{{1, 32}, {3, 64}, {17, 96}, {40, 512}, {2, 2816}}
	for _, f := range Formats() {
		for _, dt := range allDTypes {
			for i, m := range shapes {
				t.Run(fmt.Sprintf("%s/%s/%dx%d", f, dt, m.Rows, m.K), func(t *testing.T) {
					src := gaussSource(uint64(i), dt, int(m.Elements()))
					enc, st := encodeBlock(t, f, dt, m, src)
					got, dec := decodeStats(t, f, dt, m, enc, src)
					if st.N != got.N || st.MaxAbsErr != got.MaxAbsErr || !closeRel(st.SumSqErr, got.SumSqErr) || !closeRel(st.SumSqRef, got.SumSqRef) {
						t.Errorf("encoder stats %+v, decode-and-compare %+v", st, got)
					}
					if r := st.RelRMSE(); r > bound[f] {
						t.Errorf("rel RMSE %.4g > %.4g", r, bound[f])
					}
					if f == Raw && !bytes.Equal(enc, src) {
						t.Error("raw encoding is not the source bytes")
					}
					checkPartialDecode(t, f, dt, m, enc, dec)
				})
			}
		}
	}
}

// checkPartialDecode decodes each row alone and compares it with the
// whole-tensor decode.
func checkPartialDecode(t *testing.T, f Format, dt DType, m Matrix, enc []byte, all []float32) {
	t.Helper()
	row := make([]float32, m.K)
	for r := range m.Rows {
		if err := DecodeRows(f, dt, m, enc, r, 1, row); err != nil {
			t.Fatal(err)
		}
		for i, v := range row {
			if math.Float32bits(v) != math.Float32bits(all[r*m.K+int64(i)]) {
				t.Fatalf("row %d column %d: partial decode %g, whole decode %g", r, i, v, all[r*m.K+int64(i)])
			}
		}
	}
}

func TestZeroAndConstant(t *testing.T) {
	m := Matrix{4, 64}
	for _, f := range Formats() {
		for _, c := range []float32{0, 0.5, -3, 1e-30} {
			x := make([]float32, m.Elements())
			for i := range x {
				x[i] = c
			}
			src := fromFloat32(F32, x)
			enc, st := encodeBlock(t, f, F32, m, src)
			_, dec := decodeStats(t, f, F32, m, enc, src)
			for i, v := range dec {
				if math.IsNaN(float64(v)) || math.Abs(float64(v-c)) > 1e-3*math.Abs(float64(c))+1e-20 {
					t.Fatalf("%s constant %g: element %d decodes to %g (stats %+v)", f, c, i, v, st)
				}
			}
		}
	}
}

// TestWideValues: values beyond fp16 range in q4/q5/q6 give finite,
// consistent results (they saturate) instead of NaN or a panic.
func TestWideValues(t *testing.T) {
	m := Matrix{2, 64}
	x := make([]float32, m.Elements())
	for i := range x {
		x[i] = float32(i%7) * 3e37
	}
	x[5] = -math.MaxFloat32
	src := fromFloat32(F32, x)
	for _, f := range Formats() {
		enc, st := encodeBlock(t, f, F32, m, src)
		got, dec := decodeStats(t, f, F32, m, enc, src)
		for i, v := range dec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: element %d decodes to %g", f, i, v)
			}
		}
		if st.MaxAbsErr != got.MaxAbsErr || !closeRel(st.SumSqErr, got.SumSqErr) {
			t.Errorf("%s: stats %+v vs decode %+v", f, st, got)
		}
	}
}

func TestNonFinite(t *testing.T) {
	m := Matrix{4, 64}
	for _, f := range Formats() {
		for _, dt := range allDTypes {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				x := make([]float32, m.Elements())
				x[2*64+37] = float32(bad)
				src := fromFloat32(dt, x)
				e, err := NewEncoder(f, dt, m)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.ScanRows(src); !errors.Is(err, ErrNonFinite) {
					t.Errorf("%s %s ScanRows(%g): %v, want ErrNonFinite", f, dt, bad, err)
				}
				e.SetAmax(1)
				dst := planeBuffers(e, m.Rows)
				_, err = e.EncodeRows(dst, src, 0, m.Rows)
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 2 column 37") {
					t.Errorf("%s %s EncodeRows(%g): %v, want ErrNonFinite at row 2 column 37", f, dt, bad, err)
				}
				if err := CheckFinite(dt, src); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "element 165") {
					t.Errorf("CheckFinite: %v", err)
				}
			}
		}
	}
}

// planeBuffers allocates destination planes for n rows.
func planeBuffers(e *Encoder, n int64) [][]byte {
	dst := make([][]byte, len(e.planes))
	for i, p := range e.planes {
		dst[i] = make([]byte, n*p.RowBytes)
	}
	return dst
}

func TestBufferErrors(t *testing.T) {
	m := Matrix{4, 64}
	for _, f := range Formats() {
		e, err := NewEncoder(f, BF16, m)
		if err != nil {
			t.Fatal(err)
		}
		e.SetAmax(1)
		src := gaussSource(1, BF16, int(m.Elements()))
		good := planeBuffers(e, 2)
		rows := src[:2*64*2]
		if _, err := e.EncodeRows(good, rows, 1, 2); err != nil {
			t.Fatalf("%s: good call failed: %v", f, err)
		}
		short := planeBuffers(e, 2)
		short[0] = short[0][:len(short[0])-1]
		for name, call := range map[string]func() error{
			"short source":    func() error { _, err := e.EncodeRows(good, rows[1:], 1, 2); return err },
			"short plane":     func() error { _, err := e.EncodeRows(short, rows, 1, 2); return err },
			"missing plane":   func() error { _, err := e.EncodeRows(good[:len(good)-1], rows, 1, 2); return err },
			"rows past end":   func() error { _, err := e.EncodeRows(good, rows, 3, 2); return err },
			"negative row":    func() error { _, err := e.EncodeRows(good, rows, -1, 2); return err },
			"decode enc size": func() error { return DecodeRows(f, BF16, m, make([]byte, 3), 0, 1, make([]float32, 64)) },
			"decode dst size": func() error { return DecodeRows(f, BF16, m, encodedZeros(f, m), 0, 1, make([]float32, 63)) },
			"decode rows":     func() error { return DecodeRows(f, BF16, m, encodedZeros(f, m), 4, 1, make([]float32, 64)) },
			"scan partial":    func() error { _, err := e.ScanRows(src[:5]); return err },
			"to float32":      func() error { return ToFloat32(BF16, src[:3], make([]float32, 2)) },
		} {
			if err := call(); !errors.Is(err, ErrBuffer) {
				t.Errorf("%s %s: %v, want ErrBuffer", f, name, err)
			}
		}
	}
}

func encodedZeros(f Format, m Matrix) []byte {
	n, _ := f.EncodedSize(BF16, m)
	return make([]byte, n)
}

func TestEncoderSetupErrors(t *testing.T) {
	if _, err := NewEncoder(Q4, BF16, Matrix{2, 48}); !errors.Is(err, ErrDims) {
		t.Errorf("q4 K=48: %v, want ErrDims", err)
	}
	if _, err := NewEncoder(NVFP4, BF16, Matrix{2, 24}); !errors.Is(err, ErrDims) {
		t.Errorf("nvfp4 K=24: %v, want ErrDims", err)
	}
	if _, err := NewEncoder(Format(99), BF16, Matrix{2, 32}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("format 99: %v", err)
	}
	if _, err := NewEncoder(Q8, DType(9), Matrix{2, 32}); !errors.Is(err, ErrUnknownDType) {
		t.Errorf("dtype 9: %v", err)
	}
	e, _ := NewEncoder(NVFP4, BF16, Matrix{1, 16})
	if _, err := e.EncodeRows(planeBuffers(e, 1), make([]byte, 32), 0, 1); !errors.Is(err, ErrNeedScan) {
		t.Errorf("nvfp4 without SetAmax: %v, want ErrNeedScan", err)
	}
	e.SetAmax(2688)
	if got := e.TensorPlane(2); !bytes.Equal(got, []byte{0, 0, 0x80, 0x3f}) {
		t.Errorf("nvfp4 global plane for amax 2688 = % x, want scale 1.0", got)
	}
	if e.TensorPlane(0) != nil || e.TensorPlane(3) != nil {
		t.Error("TensorPlane of a row plane or out of range is not nil")
	}
}

// TestConcurrentEqualsSerial encodes disjoint row ranges concurrently and
// compares with one serial call.
func TestConcurrentEqualsSerial(t *testing.T) {
	m := Matrix{37, 256}
	for _, f := range Formats() {
		src := gaussSource(3, BF16, int(m.Elements()))
		want, wst := encodeBlock(t, f, BF16, m, src)
		e, _ := NewEncoder(f, BF16, m)
		a, _ := e.ScanRows(src)
		e.SetAmax(a)
		size, _ := f.EncodedSize(BF16, m)
		got := make([]byte, size)
		for i, p := range e.planes {
			copy(got[p.Offset:], e.TensorPlane(i))
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var st Stats
		rb := m.K * 2
		for r0 := int64(0); r0 < m.Rows; r0 += 5 {
			n := min(5, m.Rows-r0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				dst := make([][]byte, len(e.planes))
				for i, p := range e.planes {
					if p.RowBytes != 0 {
						dst[i] = got[p.Offset+r0*p.RowBytes : p.Offset+(r0+n)*p.RowBytes]
					}
				}
				s, err := e.EncodeRows(dst, src[r0*rb:(r0+n)*rb], r0, n)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				st.Merge(s)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if !bytes.Equal(got, want) {
			t.Errorf("%s: concurrent encoding differs from serial", f)
		}
		if st.N != wst.N || st.MaxAbsErr != wst.MaxAbsErr || !closeRel(st.SumSqErr, wst.SumSqErr) {
			t.Errorf("%s: stats %+v vs serial %+v", f, st, wst)
		}
	}
}

func TestStatsRelRMSE(t *testing.T) {
	if (Stats{}).RelRMSE() != 0 {
		t.Error("empty stats")
	}
	if !math.IsInf(Stats{SumSqErr: 1}.RelRMSE(), 1) {
		t.Error("zero reference with error")
	}
	s := Stats{SumSqErr: 1, SumSqRef: 4, MaxAbsErr: 0.5, N: 2}
	s.Merge(Stats{SumSqErr: 3, SumSqRef: 12, MaxAbsErr: 0.25, N: 3})
	if s != (Stats{SumSqErr: 4, SumSqRef: 16, MaxAbsErr: 0.5, N: 5}) || s.RelRMSE() != 0.5 {
		t.Errorf("merge: %+v", s)
	}
}

// TestNVFP4Layout checks the byte layout against a hand-worked block.
func TestNVFP4Layout(t *testing.T) {
	m := Matrix{1, 16}
	x := []float32{6, -6, 3, 0.5, 0, 1, -1.5, 2, 4, -4, 1.5, 0.5, -3, 2, -0.5, 6}
	src := fromFloat32(F32, x)
	e, _ := NewEncoder(NVFP4, F32, m)
	e.SetAmax(6 * 448) // scale_2 = 1
	dst := planeBuffers(e, 1)
	if _, err := e.EncodeRows(dst, src, 0, 1); err != nil {
		t.Fatal(err)
	}
	// Block amax 6 → s = 6/(6·1) = 1 → E4M3 0x38, exact for these values
	// (the neighbouring scales are worse).
	if dst[1][0] != 0x38 {
		t.Fatalf("block scale %#02x, want 0x38", dst[1][0])
	}
	wantCodes := []uint8{7, 0xf, 5, 1, 0, 2, 0xb, 4, 6, 0xe, 3, 1, 0xd, 4, 9, 7}
	for j := 0; j < 16; j += 2 {
		if want := wantCodes[j] | wantCodes[j+1]<<4; dst[0][j/2] != want {
			t.Errorf("code byte %d = %#02x, want %#02x", j/2, dst[0][j/2], want)
		}
	}
}

// TestAffineLayout checks the q4/q5/q6 bit packing against the decoder and
// a hand-packed q4 group.
func TestAffineLayout(t *testing.T) {
	for _, bits := range []int{4, 5, 6} {
		var c, back [32]uint8
		for j := range c {
			c[j] = uint8(j*7+3) & uint8(1<<bits-1)
		}
		buf := make([]byte, 4*bits)
		packCodes(buf, &c, bits)
		unpackCodes(buf, &back, bits)
		if back != c {
			t.Errorf("bits %d: unpack(pack) = %v", bits, back)
		}
		if bits == 4 && (buf[0] != c[0]|c[1]<<4 || buf[15] != c[30]|c[31]<<4) {
			t.Errorf("q4 nibble order: % x", buf)
		}
		if bits == 5 && buf[0] != c[0]|c[1]<<5 {
			t.Errorf("q5 bit order: % x", buf)
		}
	}
}
