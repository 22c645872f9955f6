package kernels

import (
	"errors"
	"regexp"
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
		{Metal, "metal", "threadgroup_barrier(mem_flags::mem_threadgroup)"},
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

// TestPreludesDefineTheSameNames: the Metal prelude defines every macro and
// helper the CUDA prelude defines (the dialect is one set of names), and
// only the listed extras beside them.
func TestPreludesDefineTheSameNames(t *testing.T) {
	defs := regexp.MustCompile(`(?m)^(?:#define ([A-Za-z_][A-Za-z0-9_]*)|INLINE [^(]*?\b([A-Za-z_][A-Za-z0-9_]*)\()`)
	names := func(d Dialect) map[string]bool {
		m := map[string]bool{}
		for _, g := range defs.FindAllStringSubmatch(Prelude(d), -1) {
			m[g[1]+g[2]] = true
		}
		return m
	}
	cuda, metal := names(CUDA), names(Metal)
	if len(cuda) < 40 {
		t.Fatalf("found %d names in the CUDA prelude: the pattern no longer matches", len(cuda))
	}
	for n := range cuda {
		if !metal[n] {
			t.Errorf("the Metal prelude does not define %s", n)
		}
	}
	extras := map[string]bool{"DGQ_SHARED_STORAGE": true, "dgq_mul_rn": true, "dgq_add_rn": true}
	for n := range metal {
		if !cuda[n] && !extras[n] {
			t.Errorf("the Metal prelude defines %s, which the CUDA prelude does not (add it to both or to the extras)", n)
		}
	}
}
