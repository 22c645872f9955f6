package enginepack

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
)

const vectorsPath = "../../testdata/engine-codec-vectors/vectors.json"

type encodeCase struct {
	Input   string  `json:"input"`
	Shape   []int64 `json:"shape"`
	Kind    string  `json:"kind"`
	BF16    string  `json:"bf16_le_b64"`
	Encoded string  `json:"encoded_b64"`
}

// TestEngineEncodeVectors: every encode case of the engine's own vectors is
// reproduced byte for byte, through both EncodeTensor (bytes in) and
// EncodeMatrix (float32 in).
func TestEngineEncodeVectors(t *testing.T) {
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Encode []encodeCase `json:"encode"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Encode) < 50 {
		t.Fatalf("only %d encode cases", len(v.Encode))
	}
	kinds := map[string]int{}
	for i, c := range v.Encode {
		t.Run(fmt.Sprintf("%d_%s_%v_%s", i, c.Input, c.Shape, c.Kind), func(t *testing.T) {
			checkEncodeCase(t, c)
		})
		kinds[c.Kind]++
	}
	for _, k := range []string{KindQ4, KindQ6, KindQ8, KindNVFP4} {
		if kinds[k] == 0 {
			t.Errorf("no vectors for %s", k)
		}
	}
}

func checkEncodeCase(t *testing.T, c encodeCase) {
	in, err1 := base64.StdEncoding.DecodeString(c.BF16)
	want, err2 := base64.StdEncoding.DecodeString(c.Encoded)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	got, err := EncodeTensor(c.Kind, "BF16", in, c.Shape)
	if err != nil {
		t.Fatal(err)
	}
	if size, _ := MatrixBytes(c.Kind, c.Shape[0], c.Shape[1]); int64(len(want)) != size {
		t.Errorf("vector is %d bytes, MatrixBytes says %d", len(want), size)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeTensor differs at byte %d of %d", firstDiff(got, want), len(want))
	}
	vals, _ := DecodeElements("BF16", in)
	got, err = EncodeMatrix(c.Kind, vals, int(c.Shape[0]), int(c.Shape[1]))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeMatrix: err %v, differs at byte %d", err, firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestE4M3KnownValues: fixed points of the E4M3 encoder and decoder.
func TestE4M3KnownValues(t *testing.T) {
	cases := []struct {
		f    float32
		bits uint8
	}{
		{0, 0x00}, {1.0 / 512, 0x01}, {1.0 / 64, 0x08}, {0.25, 0x28}, {0.5, 0x30}, {1, 0x38},
		{1.5, 0x3c}, {2, 0x40}, {8, 0x50}, {448, 0x7e}, {1e9, 0x7e}, {float32(math.Inf(1)), 0x7e},
		{-1, 0xb8}, {-1e9, 0xfe}, {float32(math.NaN()), 0x7e},
	}
	for _, c := range cases {
		if got := E4M3FromFloat32(c.f); got != c.bits {
			t.Errorf("E4M3FromFloat32(%g) = %#02x, want %#02x", c.f, got, c.bits)
		}
	}
	if !math.IsNaN(float64(E4M3ToFloat32(0x7f))) || !math.IsNaN(float64(E4M3ToFloat32(0xff))) {
		t.Error("0x7f/0xff must decode to NaN")
	}
	if E4M3ToFloat32(0x01) != float32(math.Ldexp(1, -9)) || E4M3ToFloat32(0x7e) != 448 {
		t.Error("subnormal or maximum decodes wrong")
	}
}

// TestE4M3MatchesNearestEven compares the bit algorithm with a plain
// search (the nearest finite E4M3 value, ties to the even code, saturating
// at 448) on a sweep of float32 inputs and on every midpoint between
// neighbouring codes and its two float32 neighbours.
func TestE4M3MatchesNearestEven(t *testing.T) {
	inputs := []float32{}
	for bits := uint32(0); bits < 0x44000000; bits += 0x3fff {
		inputs = append(inputs, math.Float32frombits(bits))
	}
	for c := uint8(0); c <= 0x7e; c++ {
		next := float32(480) // the value 0x7f would have were it not NaN
		if c < 0x7e {
			next = E4M3ToFloat32(c + 1)
		}
		mid := (E4M3ToFloat32(c) + next) / 2
		inputs = append(inputs, mid,
			math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))))
	}
	for _, f := range inputs {
		want := nearestE4M3(float64(f))
		if got := E4M3FromFloat32(f); got != want {
			t.Fatalf("E4M3FromFloat32(%g [%#08x]) = %#02x, want %#02x", f, math.Float32bits(f), got, want)
		}
		if got := E4M3FromFloat32(-f); got != want|0x80 {
			t.Fatalf("E4M3FromFloat32(%g) = %#02x, want %#02x", -f, got, want|0x80)
		}
	}
}

func nearestE4M3(x float64) uint8 {
	best, bestErr := uint8(0), math.Inf(1)
	for c := uint8(0); c <= 0x7e; c++ {
		d := math.Abs(float64(E4M3ToFloat32(c)) - x)
		if d < bestErr || (d == bestErr && c%2 == 0) {
			best, bestErr = c, d
		}
	}
	return best
}

// TestE2M1Thresholds: the engine's thresholds, signs and NaN.
func TestE2M1Thresholds(t *testing.T) {
	cases := []struct {
		x    float32
		code uint8
	}{
		{0, 0}, {0.25, 0}, {0.2500001, 1}, {0.5, 1}, {0.7499999, 1}, {0.75, 2}, {1.25, 2}, {1.2500001, 3},
		{1.75, 4}, {2.5, 4}, {2.5000002, 5}, {3.5, 6}, {5, 6}, {5.0000005, 7}, {1e30, 7},
		{float32(math.Inf(1)), 7}, {-0.1, 0x8}, {float32(math.Copysign(0, -1)), 0x8}, {-0.75, 0xa},
		{-6, 0xf}, {float32(math.NaN()), 0x7}, {-float32(math.NaN()), 0x7},
	}
	for _, c := range cases {
		if got := E2M1FromFloat32(c.x); got != c.code {
			t.Errorf("E2M1FromFloat32(%g) = %#x, want %#x", c.x, got, c.code)
		}
	}
}

// TestEncoderEdgeSemantics pins behaviours the vectors do not reach.
func TestEncoderEdgeSemantics(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	row := func(vals ...float32) []float32 {
		out := make([]float32, 32)
		copy(out, vals)
		for i := len(vals); i < 32; i++ {
			out[i] = vals[len(vals)-1]
		}
		return out
	}
	t.Run("q4 ignores NaN in min/max and codes NaN as 0", func(t *testing.T) {
		got, _ := EncodeMatrix(KindQ4, row(nan, 0, 15), 1, 32)
		if d, m := le16(got, 0), le16(got, 2); d != BF16Trunc(1) || m != 0 {
			t.Fatalf("delta %#04x min %#04x", d, m)
		}
		if got[4] != 0x00 || got[5] != 0xff {
			t.Fatalf("codes % x", got[4:6])
		}
	})
	t.Run("q4 all +Inf group resets min and max to 0", func(t *testing.T) {
		got, _ := EncodeMatrix(KindQ4, row(inf), 1, 32)
		if d, m := le16(got, 0), le16(got, 2); d != BF16Trunc(1) || m != 0 || got[4] != 0xff {
			t.Fatalf("delta %#04x min %#04x code %#02x", d, m, got[4])
		}
	})
	t.Run("signed zero tie keeps the first value seen", func(t *testing.T) {
		negZero := float32(math.Copysign(0, -1))
		got, _ := EncodeMatrix(KindQ6, row(0, negZero, 1), 1, 32)
		if m := le16(got, 2); m != 0x0000 {
			t.Fatalf("min %#04x, want +0", m)
		}
		got, _ = EncodeMatrix(KindQ6, row(negZero, 0, 1), 1, 32)
		if m := le16(got, 2); m != 0x8000 {
			t.Fatalf("min %#04x, want -0", m)
		}
	})
	t.Run("q8 rounds half away from zero with the unrounded scale", func(t *testing.T) {
		got, _ := EncodeMatrix(KindQ8, row(127, -0.5, 0.5, 1.5, -2.5, nan), 1, 32)
		want := []byte{0x7f, 0xff, 0x01, 0x02, 0xfd, 0x00}
		if le16(got, 0) != BF16Trunc(1) || !bytes.Equal(got[2:8], want) {
			t.Fatalf("scale %#04x codes % x", le16(got, 0), got[2:8])
		}
	})
	t.Run("nvfp4 zero block: scale 0 and negative values stay code 0", func(t *testing.T) {
		vals := make([]float32, 16)
		vals[3] = -1e-13
		got, _ := EncodeMatrix(KindNVFP4, vals, 1, 16)
		want := append([]byte{0, 0, 0x80, 0x3f}, make([]byte, 9)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("got % x", got)
		}
	})
}

func le16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }

// TestDecodeElements: the widening conversions are exact.
func TestDecodeElements(t *testing.T) {
	cases := []struct {
		dtype string
		in    []byte
		want  float32
	}{
		{"BF16", []byte{0x80, 0x3f}, 1},
		{"F16", []byte{0x00, 0x3c}, 1},
		{"F16", []byte{0x01, 0x00}, float32(math.Ldexp(1, -24))},
		{"F16", []byte{0x00, 0xc0}, -2},
		{"F16", []byte{0xff, 0x7b}, 65504},
		{"F16", []byte{0x00, 0x7c}, float32(math.Inf(1))},
		{"F32", []byte{0x00, 0x00, 0x80, 0xbf}, -1},
	}
	for _, c := range cases {
		got, err := DecodeElements(c.dtype, c.in)
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s % x: got %v %v, want %g", c.dtype, c.in, got, err, c.want)
		}
	}
	if _, err := DecodeElements("I32", []byte{0, 0, 0, 0}); err == nil {
		t.Error("I32 must be refused")
	}
}
