package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
)

// encodeFormat encodes random rows (scaled per row, offset per group) to f
// from f32 sources with the searching encoder.
func encodeFormat(t *testing.T, rng *rand.Rand, f codecs.Format, m codecs.Matrix) []byte {
	return encodeFormatWith(t, rng, f, m, codecs.Search, nil)
}

// encodeFormatWith is encodeFormat with the given encoder method; matScale,
// when not nil, multiplies the values of matrix i by matScale[i mod len]
// (so that every expert of a stack gets its own nvfp4 scale).
func encodeFormatWith(t *testing.T, rng *rand.Rand, f codecs.Format, m codecs.Matrix, method codecs.Method, matScale []float64) []byte {
	t.Helper()
	src := make([]float32, m.Elements())
	matRows := m.Rows / m.Matrices()
	for r := int64(0); r < m.Rows; r++ {
		scale := math.Exp(3 * rng.NormFloat64())
		if matScale != nil {
			scale = matScale[int(r/max(matRows, 1))%len(matScale)] * math.Exp(0.5*rng.NormFloat64())
		}
		off := 0.0
		for j := int64(0); j < m.K; j++ {
			if j%32 == 0 {
				off = rng.NormFloat64() * scale * 0.5
			}
			src[r*m.K+j] = float32(off + rng.NormFloat64()*scale)
		}
	}
	enc, _, err := codecs.EncodeTensor(f, codecs.F32, m, method, Bytes(src))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// uploadTensor makes a tensor of pack bytes resident (Ops.UploadTensor:
// staged and re-laid into the planar layout).
func uploadTensor(t *testing.T, ops *Ops, f codecs.Format, dt codecs.DType, m codecs.Matrix, enc []byte) *Buffer {
	t.Helper()
	b, err := ops.UploadTensor(f, dt, m, enc)
	if err != nil {
		t.Fatalf("UploadTensor %s %s %d×%d (%d matrices): %v", f, dt, m.Rows, m.K, m.Matrices(), err)
	}
	return b
}

// checkDequant makes enc resident (re-laid on the device) and decodes it with
// Ops.Dequant, comparing with codecs.DecodeRows: bit for bit, NaN matching
// any NaN unless strict.
func checkDequant(t *testing.T, d *Device, ops *Ops, f codecs.Format, dt codecs.DType, m codecs.Matrix, enc []byte, what string, strict bool) {
	t.Helper()
	want := make([]float32, m.Elements())
	if err := codecs.DecodeRows(f, dt, m, enc, 0, m.Rows, want); err != nil {
		t.Fatal(err)
	}
	eb := uploadTensor(t, ops, f, dt, m, enc)
	defer eb.Free()
	ob, err := d.Alloc(max(4*m.Elements(), 4))
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Free()
	if err := ops.Dequant(ob.Ptr(), eb.Ptr(), f, dt, m); err != nil {
		t.Fatalf("%s %s %d×%d %s: %v", f, dt, m.Rows, m.K, what, err)
	}
	got := download[float32](t, ob, int(m.Elements()))
	compareBits(t, fmt.Sprintf("%s %s %d×%d/%d %s", f, dt, m.Rows, m.K, m.Matrices(), what), got, want, strict)
}

// compareBits reports the values of got that differ from want in their
// bits (NaN matching any NaN unless strict).
func compareBits(t *testing.T, what string, got, want []float32, strict bool) {
	t.Helper()
	bad := 0
	for i := range want {
		ok := math.Float32bits(got[i]) == math.Float32bits(want[i])
		if !strict {
			ok = sameBits(got[i], want[i])
		}
		if !ok {
			if bad < 5 {
				t.Errorf("%s: [%d] = %g (%#08x), want %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

func randomBytes(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// specialBF16 are bf16 scales (q8's row scale, the affine deltas and mins)
// that must decode like the host: NaN (quiet, signalling, negative), ±Inf,
// subnormals, ±0, the extremes.
var specialBF16 = []uint16{0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80, 0x0001, 0x807f, 0x0040, 0, 0x8000, 0x7f7f, 0x0080,
	0x3f80, 0x3b80}

// packLayout is the pack geometry of a tensor (codecs.Format.Layout).
func packLayout(t *testing.T, f codecs.Format, dt codecs.DType, m codecs.Matrix) codecs.Layout {
	t.Helper()
	l, err := f.Layout(dt, m)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// setQ8Scales puts special bf16 row scales on every other row of a q8 pack.
func setQ8Scales(t *testing.T, rng *rand.Rand, enc []byte, dt codecs.DType, m codecs.Matrix) {
	l := packLayout(t, codecs.Q8, dt, m)
	for r := int64(0); r < m.Rows; r += 2 {
		binary.LittleEndian.PutUint16(enc[l.RowOffset(r):], specialBF16[rng.IntN(len(specialBF16))])
	}
}

// setAffineParams puts special bf16 deltas and mins on some blocks of a
// q4/q5/q6 pack.
func setAffineParams(t *testing.T, rng *rand.Rand, enc []byte, f codecs.Format, dt codecs.DType, m codecs.Matrix) {
	l := packLayout(t, f, dt, m)
	bb := int64(4 + 4*f.Bits())
	for r := int64(0); r < m.Rows; r++ {
		for g := int64(0); g < m.K/32; g++ {
			if rng.IntN(3) == 0 {
				at := l.RowOffset(r) + g*bb + int64(2*rng.IntN(2))
				binary.LittleEndian.PutUint16(enc[at:], specialBF16[rng.IntN(len(specialBF16))])
			}
		}
	}
}

// setMatScales writes s(i) as the f32 scale of every matrix i of an nvfp4
// pack.
func setMatScales(t *testing.T, enc []byte, dt codecs.DType, m codecs.Matrix, s func(i int64) uint32) {
	l := packLayout(t, codecs.NVFP4, dt, m)
	for i := range l.Matrices {
		start, _ := l.Span(i*l.MatRows, 0)
		binary.LittleEndian.PutUint32(enc[start:], s(i))
	}
}

// TestDequantFormats checks the device decoders of q4, q5, q6 and q8
// bit-exactly against codecs.DecodeRows on encoder output (both methods) and
// on random bytes (random bf16 deltas and mins hit NaN, Inf and subnormals,
// and special ones are planted; q8 gets special bf16 row scales), odd row
// counts included.
func TestDequantFormats(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(11, 12))
	shapes := []codecs.Matrix{{Rows: 1, K: 32}, {Rows: 3, K: 64}, {Rows: 5, K: 96}, {Rows: 7, K: 160},
		{Rows: 17, K: 2816}, {Rows: 33, K: 4096}, {Rows: 1001, K: 704}, {Rows: 12, K: 64, Mats: 3}}
	for _, f := range []codecs.Format{codecs.Q4, codecs.Q5, codecs.Q6, codecs.Q8} {
		ms := shapes
		if f == codecs.Q8 {
			ms = append(append([]codecs.Matrix(nil), ms...), codecs.Matrix{Rows: 1, K: 1}, codecs.Matrix{Rows: 3, K: 33}, codecs.Matrix{Rows: 9, K: 7})
		}
		for _, m := range ms {
			checkDequant(t, d, ops, f, codecs.F32, m, encodeFormat(t, rng, f, m), "encoded", false)
			checkDequant(t, d, ops, f, codecs.F32, m, encodeFormatWith(t, rng, f, m, codecs.MinMax, nil), "encoded minmax", false)
			size, err := f.EncodedSize(codecs.F32, m)
			if err != nil {
				t.Fatal(err)
			}
			enc := randomBytes(rng, size)
			if f == codecs.Q8 {
				setQ8Scales(t, rng, enc, codecs.F32, m)
			} else {
				setAffineParams(t, rng, enc, f, codecs.F32, m)
			}
			checkDequant(t, d, ops, f, codecs.F32, m, enc, "random bytes", false)
		}
	}
}

// specialScale2 are nvfp4 matrix scales (f32): NaN (quiet, signalling,
// negative), ±Inf, ±0, subnormals, huge, normal.
var specialScale2 = []uint32{0x7fc00000, 0x7f800001, 0xffc00001, 0x7f800000, 0xff800000, 0, 0x80000000,
	0x00000001, 0x807fffff, 0x00400000, 0x7f7fffff, 0xff7fffff, 0x7e800000, 0x00800000, 0x3f800000, 0x3b800000}

// TestDequantNVFP4 checks the nvfp4 device decoder bit-exactly against
// codecs.DecodeRows (NaN matching NaN): encoder output (both methods; 3-D
// stacks whose experts have scales far apart), random bytes (random matrix
// scales too), and every one of the 256 E4M3 block-scale codes times every
// E2M1 code under special matrix scales, a different one per matrix of a
// stack.
func TestDequantNVFP4(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(15, 16))
	f := codecs.NVFP4
	shapes := []codecs.Matrix{{Rows: 1, K: 16}, {Rows: 3, K: 32}, {Rows: 5, K: 48}, {Rows: 7, K: 160},
		{Rows: 9, K: 16}, {Rows: 17, K: 2816}, {Rows: 33, K: 4096}, {Rows: 1001, K: 704}, {Rows: 2, K: 0},
		{Rows: 12, K: 48, Mats: 4}, {Rows: 35, K: 160, Mats: 7}, {Rows: 8, K: 16, Mats: 8}}
	expert := []float64{1e-3, 1, 40, 3e2, 0.05, 7, 1e3}
	for _, m := range shapes {
		if m.K > 0 {
			checkDequant(t, d, ops, f, codecs.F32, m, encodeFormatWith(t, rng, f, m, codecs.Search, expert), "encoded", false)
			checkDequant(t, d, ops, f, codecs.F32, m, encodeFormatWith(t, rng, f, m, codecs.MinMax, expert), "encoded minmax", false)
		}
		size, err := f.EncodedSize(codecs.F32, m)
		if err != nil {
			t.Fatal(err)
		}
		checkDequant(t, d, ops, f, codecs.F32, m, randomBytes(rng, size), "random bytes", false)
	}
	// Every E4M3 scale code (block b of the tensor gets code b mod 256),
	// every E2M1 nibble in each block, then random codes; under each special
	// matrix scale (matrix i of a stack: the i-th following it).
	for _, m := range []codecs.Matrix{{Rows: 16, K: 256}, {Rows: 17, K: 272}, {Rows: 18, K: 256, Mats: 6}} {
		l := packLayout(t, f, codecs.F32, m)
		hk, sk := m.K/2, m.K/16
		for si := range specialScale2 {
			for _, codes := range []string{"every code", "random codes"} {
				enc := randomBytes(rng, l.Size())
				for r := int64(0); r < m.Rows; r++ {
					off := l.RowOffset(r)
					for b := int64(0); b < sk; b++ {
						enc[off+hk+b] = byte(r*sk + b)
					}
					if codes == "every code" {
						for i := int64(0); i < hk; i++ {
							j := byte((r*hk + i) % 8)
							enc[off+i] = (2*j+1)<<4 | 2*j
						}
					}
				}
				setMatScales(t, enc, codecs.F32, m, func(i int64) uint32 { return specialScale2[(si+int(i))%len(specialScale2)] })
				checkDequant(t, d, ops, f, codecs.F32, m, enc, fmt.Sprintf("all E4M3 scales, %s, scale %#08x", codes, specialScale2[si]), false)
			}
		}
	}
}

// TestDequantRaw checks raw bf16/f16/f32 decoding bit for bit (NaN payloads
// included), every 16-bit pattern and random f32 bits.
func TestDequantRaw(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(13, 14))
	m16 := codecs.Matrix{Rows: 257, K: 256}
	all16 := make([]byte, 2*m16.Elements())
	for i := range m16.Elements() {
		binary.LittleEndian.PutUint16(all16[2*i:], uint16(i))
	}
	checkDequant(t, d, ops, codecs.Raw, codecs.F16, m16, all16, "every f16", true)
	checkDequant(t, d, ops, codecs.Raw, codecs.BF16, m16, all16, "every bf16", true)
	for _, m := range []codecs.Matrix{{Rows: 1, K: 1}, {Rows: 3, K: 33}, {Rows: 1001, K: 704}} {
		checkDequant(t, d, ops, codecs.Raw, codecs.F16, m, randomBytes(rng, 2*m.Elements()), "random", true)
		checkDequant(t, d, ops, codecs.Raw, codecs.F32, m, randomBytes(rng, 4*m.Elements()), "random", true)
	}
}
