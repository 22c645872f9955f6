package codecs

import (
	"math"
	"testing"
)

func TestFloat32ToE4M3Table(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint8
	}{
		{0, 0x00}, {float32(math.Copysign(0, -1)), 0x80},
		{0x1p-9, 0x01}, {0x1p-10, 0x00}, {0x1.8p-9, 0x02}, {0x1.4p-9, 0x01}, // 2^-10 and 1.5·2^-9 are ties (to even)
		{0.0068, 0x03}, {0.0146, 0x07}, {0.015, 0x08}, {0x1.ep-7, 0x08}, {0x1p-6, 0x08}, // 7.5·2^-9 ties up to the smallest normal
		{1, 0x38}, {1.0625, 0x38}, {1.125, 0x39}, {1.1875, 0x3a}, {-2, 0xc0},
		{100, 0x6c}, // 100 = 96+4 ties to 96 (ggml rounds it up to 104) {101, 0x6d}, {240, 0x77}, {248, 0x78}, {250, 0x78}, {256, 0x78}, {272, 0x78}, {273, 0x79},
		{288, 0x79}, {300, 0x79}, {304, 0x7a}, {416, 0x7d}, {432, 0x7e}, {440, 0x7e}, {447, 0x7e},
		{448, 0x7e}, {464, 0x7e}, {500, 0x7e}, {1e9, 0x7e}, {-300, 0xf9}, {-1e30, 0xfe},
		{float32(math.Inf(1)), 0x7e}, {float32(math.Inf(-1)), 0xfe}, {float32(math.NaN()), 0x7f},
		{1e-30, 0x00}, {-1e-30, 0x80}, {0x1.0001p-10, 0x01},
	} {
		if got := Float32ToE4M3(tc.in); got != tc.want {
			t.Errorf("Float32ToE4M3(%g) = %#02x, want %#02x", tc.in, got, tc.want)
		}
	}
}

func TestE4M3Decode(t *testing.T) {
	for _, tc := range []struct {
		in   uint8
		want float32
	}{{0x00, 0}, {0x01, 0x1p-9}, {0x07, 7 * 0x1p-9}, {0x08, 0x1p-6}, {0x38, 1}, {0x77, 240}, {0x78, 256}, {0x79, 288}, {0x7e, 448}, {0xfe, -448}, {0x81, -0x1p-9}} {
		if got := E4M3ToFloat32(tc.in); got != tc.want {
			t.Errorf("E4M3ToFloat32(%#02x) = %g, want %g", tc.in, got, tc.want)
		}
	}
	for c := range 256 {
		v := E4M3ToFloat32(uint8(c))
		if c&0x7f == 0x7f {
			if !math.IsNaN(float64(v)) {
				t.Errorf("code %#02x = %g, want NaN", c, v)
			}
			continue
		}
		if back := Float32ToE4M3(v); back != uint8(c) {
			t.Errorf("code %#02x → %g → %#02x", c, v, back)
		}
	}
}

func TestF16Table(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00}, {1e6, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {0x1p-14, 0x0400}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000},
		{0x1.8p-25, 0x0001}, {0x1.8p-24, 0x0002}, {0x1.4p-23, 0x0002}, {1023.5 * 0x1p-24, 0x0400}, {1022.5 * 0x1p-24, 0x03fe},
		{1 + 0x1p-11, 0x3c00}, {1 + 0x1.8p-10, 0x3c02}, {float32(math.Copysign(0, -1)), 0x8000}, {1e-30, 0},
	} {
		if got := Float32ToF16(tc.in); got != tc.want {
			t.Errorf("Float32ToF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if h := Float32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("Float32ToF16(NaN) = %#04x, not a NaN", h)
	}
	for h := range 1 << 16 {
		v := F16ToFloat32(uint16(h))
		if math.IsNaN(float64(v)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("F16ToFloat32(%#04x) = NaN", h)
			}
			continue
		}
		if back := Float32ToF16(v); back != uint16(h) {
			t.Fatalf("f16 %#04x → %g → %#04x", h, v, back)
		}
	}
}

func TestBF16Table(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80}, {1 + 0x1p-8, 0x3f80}, {1 + 0x1.8p-7, 0x3f82}, {1 + 0x1.01p-8, 0x3f81}, {-2, 0xc000},
		{float32(math.Inf(1)), 0x7f80}, {math.MaxFloat32, 0x7f80}, {0x1p-133, 0x0001},
	} {
		if got := Float32ToBF16(tc.in); got != tc.want {
			t.Errorf("Float32ToBF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if b := Float32ToBF16(float32(math.NaN())); !math.IsNaN(float64(BF16ToFloat32(b))) {
		t.Errorf("Float32ToBF16(NaN) = %#04x, not a NaN", b)
	}
	for b := range 1 << 16 {
		v := BF16ToFloat32(uint16(b))
		if !math.IsNaN(float64(v)) && Float32ToBF16(v) != uint16(b) {
			t.Fatalf("bf16 %#04x does not round-trip", b)
		}
	}
}

func TestE2M1Code(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint8
	}{
		{0, 0}, {0.25, 0}, {0.2501, 1}, {0.5, 1}, {0.75, 2}, {1.25, 2}, {1.2501, 3}, {1.75, 4}, {2.5, 4},
		{2.5001, 5}, {3.5, 6}, {5, 6}, {5.0001, 7}, {6, 7}, {7, 7}, {1e30, 7}, {-3.5, 0xe}, {-0.5, 0x9},
		{-0.1, 0}, {float32(math.Copysign(0, -1)), 0}, {float32(math.NaN()), 0}, {float32(math.Inf(-1)), 0xf},
	} {
		if got := E2M1Code(tc.in); got != tc.want {
			t.Errorf("E2M1Code(%g) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
	for c := range 16 {
		if c == 8 {
			continue
		}
		if got := E2M1Code(E2M1ToFloat32(uint8(c))); got != uint8(c) {
			t.Errorf("E2M1 %#x does not round-trip (%#x)", c, got)
		}
	}
}

// nearestRNE returns the code among candidates whose decoded value is
// nearest to v, ties to the even code (brute force; the reference for the
// fuzz target).
func nearestRNE(v float64, codes []int, dec func(int) float64) int {
	best, bd := -1, math.Inf(1)
	for _, c := range codes {
		d := math.Abs(dec(c) - v)
		if d < bd || d == bd && c%2 == 0 {
			best, bd = c, d
		}
	}
	return best
}

func FuzzConversions(f *testing.F) {
	for _, v := range []float32{0, 1, 248, 300, 448, 465, 0x1p-10, 65520, 0x1p-25, 1e-40, -7.5e-3} {
		f.Add(math.Float32bits(v))
	}
	var pos []int
	for c := range 0x7f {
		pos = append(pos, c)
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		v := math.Float32frombits(bits)
		if math.IsNaN(float64(v)) {
			if Float32ToE4M3(v) != 0x7f || !math.IsNaN(float64(F16ToFloat32(Float32ToF16(v)))) || !math.IsNaN(float64(BF16ToFloat32(Float32ToBF16(v)))) {
				t.Fatalf("NaN %#x not kept", bits)
			}
			return
		}
		a := math.Abs(float64(v))
		// E4M3: nearest magnitude by brute force, saturating at 448.
		want := nearestRNE(math.Min(a, 448), pos, func(c int) float64 { return float64(E4M3ToFloat32(uint8(c))) })
		if got := Float32ToE4M3(v) & 0x7f; int(got) != want {
			t.Fatalf("Float32ToE4M3(%g) = %#02x, want %#02x", v, got, want)
		}
		// F16 and BF16: the result's neighbours are no nearer (ties to even).
		checkNeighbours(t, "f16", a, int(Float32ToF16(float32(a))), 0x7bff, func(c int) float64 { return float64(F16ToFloat32(uint16(c))) }, 65520)
		checkNeighbours(t, "bf16", a, int(Float32ToBF16(float32(a))), 0x7f7f, func(c int) float64 { return float64(BF16ToFloat32(uint16(c))) }, 0x1.ffp127)
	})
}

// checkNeighbours verifies that code c is a round-to-nearest-even result
// for magnitude a (values from overflow up must give infinity).
func checkNeighbours(t *testing.T, name string, a float64, c, maxCode int, dec func(int) float64, overflow float64) {
	t.Helper()
	if a >= overflow {
		if !math.IsInf(dec(c), 1) {
			t.Fatalf("%s(%g) = %#x, want +Inf", name, a, c)
		}
		return
	}
	var cand []int
	for d := -1; d <= 1; d++ {
		if n := c + d; n >= 0 && n <= maxCode {
			cand = append(cand, n)
		}
	}
	if want := nearestRNE(a, cand, dec); want != c {
		t.Fatalf("%s(%g) = %#x (%g), want %#x (%g)", name, a, c, dec(c), want, dec(want))
	}
}
