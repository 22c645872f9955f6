package codecs

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// randomSource makes n elements of dtype dt with assorted hard cases:
// constant groups, zeros of both signs, tiny and huge values, outliers.
func randomSource(r *rand.Rand, dt DType, n int) []byte {
	x := make([]float32, n)
	for g := 0; g < n; g += 32 {
		kind := r.IntN(12)
		scale := float32(math.Pow(10, r.Float64()*8-6))
		for j := g; j < min(g+32, n); j++ {
			v := float32(r.NormFloat64()) * scale
			switch kind {
			case 0:
				v = scale // constant group
			case 1:
				v = float32(math.Copysign(0, float64(r.IntN(2)-1)))
			case 2:
				if r.IntN(8) == 0 {
					v *= 100 // outliers
				}
			case 3:
				v *= 1e-6 // fp16-subnormal steps
			case 4:
				if r.IntN(16) == 0 {
					v = 70000 // beyond the search range
				}
			case 5, 6:
				v = float32(r.IntN(kind*3)) * scale // on a grid: rounding and selection ties
			case 7:
				v = float32(r.IntN(3)-1) * 0x1p-110 // range below minRange
			}
			if dt == F16 && math.Abs(float64(v)) > 65504 {
				v = 65504
			}
			x[j] = v
		}
	}
	return fromFloat32(dt, x)
}

// fromFloat32 rounds values to dt and returns the little-endian bytes.
func fromFloat32(dt DType, x []float32) []byte {
	out := make([]byte, len(x)*dt.Size())
	for i, v := range x {
		switch dt {
		case BF16:
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToBF16(v))
		case F16:
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToF16(v))
		case F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	}
	return out
}

// encodeBlock encodes rows [0, rows) into a fresh whole-tensor buffer.
func encodeBlock(t *testing.T, f Format, dt DType, m Matrix, src []byte) ([]byte, Stats) {
	t.Helper()
	buf, st, err := EncodeTensor(f, dt, m, src)
	if err != nil {
		t.Fatal(err)
	}
	return buf, st
}

// TestAffineFastMatchesReference checks that the SIMD path (when this
// machine has one) is bit-identical to the scalar reference, codes,
// scales, biases and statistics included.
func TestAffineFastMatchesReference(t *testing.T) {
	if affineFast == nil {
		t.Skip("no SIMD path on this machine/build")
	}
	fast := affineFast
	defer func() { affineFast = fast }()
	r := rand.New(rand.NewPCG(7, 7))
	for _, f := range []Format{Q4, Q5, Q6} {
		for _, dt := range []DType{BF16, F16, F32} {
			for _, m := range []Matrix{{1, 32}, {1, 512}, {3, 544}, {16, 64}, {7, 2816}, {64, 96}, {33, 1024}} {
				src := randomSource(r, dt, int(m.Elements()))
				affineFast = fast
				got, gst := encodeBlock(t, f, dt, m, src)
				affineFast = nil
				want, wst := encodeBlock(t, f, dt, m, src)
				if !bytes.Equal(got, want) {
					i := 0
					for got[i] == want[i] {
						i++
					}
					t.Errorf("%s %s %v: encodings differ first at byte %d of %d (got %#x want %#x)", f, dt, m, i, len(got), got[i], want[i])
				}
				if gst != wst {
					t.Errorf("%s %s %v: stats differ: got %+v want %+v", f, dt, m, gst, wst)
				}
			}
		}
	}
}
