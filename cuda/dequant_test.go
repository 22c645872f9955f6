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
// from f32 sources.
func encodeFormat(t *testing.T, rng *rand.Rand, f codecs.Format, m codecs.Matrix) []byte {
	t.Helper()
	src := make([]float32, m.Elements())
	for r := int64(0); r < m.Rows; r++ {
		scale := math.Exp(3 * rng.NormFloat64())
		off := 0.0
		for j := int64(0); j < m.K; j++ {
			if j%32 == 0 {
				off = rng.NormFloat64() * scale * 0.5
			}
			src[r*m.K+j] = float32(off + rng.NormFloat64()*scale)
		}
	}
	enc, _, err := codecs.EncodeTensor(f, codecs.F32, m, Bytes(src))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// checkDequant decodes enc on the device with Ops.Dequant and compares with
// codecs.DecodeRows: bit for bit, NaN matching any NaN unless strict.
func checkDequant(t *testing.T, d *Device, ops *Ops, f codecs.Format, dt codecs.DType, m codecs.Matrix, enc []byte, what string, strict bool) {
	t.Helper()
	want := make([]float32, m.Elements())
	if err := codecs.DecodeRows(f, dt, m, enc, 0, m.Rows, want); err != nil {
		t.Fatal(err)
	}
	eb := upload(t, d, enc)
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
	bad := 0
	for i := range got {
		ok := math.Float32bits(got[i]) == math.Float32bits(want[i])
		if !strict {
			ok = sameBits(got[i], want[i])
		}
		if !ok {
			if bad < 5 {
				t.Errorf("%s %s %d×%d %s: [%d] = %g (%#08x), want %g (%#08x)", f, dt, m.Rows, m.K, what, i,
					got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s %s %d×%d %s: %d of %d values differ", f, dt, m.Rows, m.K, what, bad, len(got))
	}
}

func randomBytes(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// specialF32 are f32 scales that must decode like the host: NaN, ±Inf,
// subnormals, ±0, the extremes.
var specialF32 = []uint32{0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000, 0x00000001, 0x807fffff,
	0x00400000, 0, 0x80000000, 0x7f7fffff, 0x00800000, 0x3f800000, 0x3b800000}

func planeOf(t *testing.T, f codecs.Format, m codecs.Matrix, name string) codecs.Plane {
	t.Helper()
	ps, err := f.Planes(codecs.F32, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("%s has no plane %q", f, name)
	return codecs.Plane{}
}

// TestDequantFormats checks the device decoders of q4, q5, q6 and q8
// bit-exactly against codecs.DecodeRows on encoder output and on random
// bytes (random fp16 scales hit NaN, Inf and subnormals; q8 gets special f32
// row scales), odd row counts included.
func TestDequantFormats(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(11, 12))
	shapes := []codecs.Matrix{{Rows: 1, K: 32}, {Rows: 3, K: 64}, {Rows: 5, K: 96}, {Rows: 7, K: 160},
		{Rows: 17, K: 2816}, {Rows: 33, K: 4096}, {Rows: 1001, K: 704}}
	for _, f := range []codecs.Format{codecs.Q4, codecs.Q5, codecs.Q6, codecs.Q8} {
		ms := shapes
		if f == codecs.Q8 {
			ms = append(append([]codecs.Matrix(nil), ms...), codecs.Matrix{Rows: 1, K: 1}, codecs.Matrix{Rows: 3, K: 33}, codecs.Matrix{Rows: 9, K: 7})
		}
		for _, m := range ms {
			checkDequant(t, d, ops, f, codecs.F32, m, encodeFormat(t, rng, f, m), "encoded", false)
			size, err := f.EncodedSize(codecs.F32, m)
			if err != nil {
				t.Fatal(err)
			}
			enc := randomBytes(rng, size)
			if f == codecs.Q8 { // special row scales on every other row
				sp := planeOf(t, f, m, "scales")
				for r := int64(0); r < m.Rows; r += 2 {
					binary.LittleEndian.PutUint32(enc[sp.Offset+4*r:], specialF32[rng.IntN(len(specialF32))])
				}
			}
			checkDequant(t, d, ops, f, codecs.F32, m, enc, "random bytes", false)
		}
	}
}

// specialScale2 are nvfp4 scale_2 (f32) values: NaN (quiet, signalling,
// negative), ±Inf, ±0, subnormals, huge, normal.
var specialScale2 = []uint32{0x7fc00000, 0x7f800001, 0xffc00001, 0x7f800000, 0xff800000, 0, 0x80000000,
	0x00000001, 0x807fffff, 0x00400000, 0x7f7fffff, 0xff7fffff, 0x7e800000, 0x00800000, 0x3f800000, 0x3b800000}

// TestDequantNVFP4 checks the nvfp4 device decoder bit-exactly against
// codecs.DecodeRows (NaN matching NaN): encoder output (ScanRows/SetAmax),
// random bytes (random scale_2 too), and every one of the 256 E4M3 block-scale
// codes times every E2M1 code under special scale_2 values.
func TestDequantNVFP4(t *testing.T) {
	d, ops := device(t)
	rng := rand.New(rand.NewPCG(15, 16))
	f := codecs.NVFP4
	shapes := []codecs.Matrix{{Rows: 1, K: 16}, {Rows: 3, K: 32}, {Rows: 5, K: 48}, {Rows: 7, K: 160},
		{Rows: 9, K: 16}, {Rows: 17, K: 2816}, {Rows: 33, K: 4096}, {Rows: 1001, K: 704}, {Rows: 2, K: 0}}
	for _, m := range shapes {
		if m.K > 0 {
			checkDequant(t, d, ops, f, codecs.F32, m, encodeFormat(t, rng, f, m), "encoded", false)
		}
		size, err := f.EncodedSize(codecs.F32, m)
		if err != nil {
			t.Fatal(err)
		}
		checkDequant(t, d, ops, f, codecs.F32, m, randomBytes(rng, size), "random bytes", false)
	}
	// Every E4M3 scale code (block b of the tensor gets code b mod 256),
	// every E2M1 nibble in each block, then random codes; under each special
	// scale_2.
	for _, m := range []codecs.Matrix{{Rows: 16, K: 256}, {Rows: 17, K: 272}} {
		size, err := f.EncodedSize(codecs.F32, m)
		if err != nil {
			t.Fatal(err)
		}
		cp, sp, gp := planeOf(t, f, m, "codes"), planeOf(t, f, m, "scales"), planeOf(t, f, m, "global")
		for _, s2 := range specialScale2 {
			for _, codes := range []string{"every code", "random codes"} {
				enc := randomBytes(rng, size)
				for b := int64(0); b < sp.Size; b++ {
					enc[sp.Offset+b] = byte(b)
				}
				if codes == "every code" {
					for i := int64(0); i < cp.Size; i++ {
						j := byte(i % 8)
						enc[cp.Offset+i] = (2*j+1)<<4 | 2*j
					}
				}
				binary.LittleEndian.PutUint32(enc[gp.Offset:], s2)
				checkDequant(t, d, ops, f, codecs.F32, m, enc, fmt.Sprintf("all E4M3 scales, %s, scale_2 %#08x", codes, s2), false)
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
