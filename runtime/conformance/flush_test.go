package conformance

import (
	"math"
	"testing"
)

// The flushed-subnormal values Options.Numerics.FlushSubnormals accepts for AddScale
// and Temper: every subnormal input and result is zero of its sign, the
// rest IEEE f32.
func TestFlushed(t *testing.T) {
	sub, minNormal := math.Float32frombits(1), math.Float32frombits(0x00800000)
	negZero := float32(math.Copysign(0, -1))
	bits := math.Float32bits
	for _, c := range []struct {
		name string
		got  float32
		want float32
	}{
		{"flush of a subnormal", flush(sub), 0},
		{"flush of a negative subnormal", flush(-sub), negZero},
		{"flush of the smallest normal", flush(minNormal), minNormal},
		{"flush of zero", flush(negZero), negZero},
		{"an input flushed", addScaleFlushed(sub, minNormal, 1, true), minNormal},
		{"a result flushed", addScaleFlushed(minNormal, 0, 0.5, true), 0},
		{"a normal sum", addScaleFlushed(1.5, 2.25, 2, true), 7.5},
		{"past the end", addScaleFlushed(1, 1, 1, false), float32(math.NaN())},
		{"a subnormal tempered", temperFlushed(-sub, 1, true), negZero},
		{"a quotient flushed", temperFlushed(minNormal, 4, true), 0},
		{"a normal quotient", temperFlushed(3, 0.5, true), 6},
	} {
		if bits(c.got) != bits(c.want) && !(c.got != c.got && c.want != c.want) {
			t.Errorf("%s: %g (%#x), want %g (%#x)", c.name, c.got, bits(c.got), c.want, bits(c.want))
		}
	}
}
