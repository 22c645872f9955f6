package kernels

import (
	"errors"
	"strings"
	"testing"
)

func TestDialect(t *testing.T) {
	tests := []struct {
		d      Dialect
		name   string
		marker string // text the prelude must hold; "" for no prelude
	}{
		{CUDA, "cuda", "__syncthreads()"},
		{Dialect(0), "Dialect(0)", ""},
		{Dialect(99), "Dialect(99)", ""},
	}
	for _, tc := range tests {
		if got := tc.d.String(); got != tc.name {
			t.Errorf("Dialect(%d).String() = %q, want %q", uint8(tc.d), got, tc.name)
		}
		p := Prelude(tc.d)
		if tc.marker == "" {
			if p != "" {
				t.Errorf("Prelude(%v) = %d bytes, want none", tc.d, len(p))
			}
			if _, err := DialectUnit(tc.d, "rmsnorm.kern"); !errors.Is(err, ErrUnknownDialect) {
				t.Errorf("DialectUnit(%v) = %v, want ErrUnknownDialect", tc.d, err)
			}
			continue
		}
		if !strings.Contains(p, tc.marker) {
			t.Errorf("Prelude(%v) lacks %q", tc.d, tc.marker)
		}
		u, err := DialectUnit(tc.d, "rmsnorm.kern")
		if err != nil || !strings.HasPrefix(u, p) || !strings.Contains(u, "KERNEL(rmsnorm_f32") {
			t.Errorf("DialectUnit(%v, rmsnorm.kern): %d bytes, %v", tc.d, len(u), err)
		}
		if _, err := DialectUnit(tc.d, "nope.kern"); !errors.Is(err, ErrUnknownFile) {
			t.Errorf("DialectUnit(%v, nope.kern) = %v, want ErrUnknownFile", tc.d, err)
		}
	}
}
