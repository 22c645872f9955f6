//go:build linux

package metal

import (
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// TestExactArithmetic runs the arithmetic probe (probe.kern, through the
// prelude and a compile plan's header, as the device compiles it) on the
// host engine: MUL_RN and ADD_RN round one operation at a time under every
// plan, with contraction off (the default build) and on (Contract, as
// Metal's Safe mode); and with contraction on, a plain a*b + c in the same
// unit does fuse, so the probe would see a rounding helper that fused.
func TestExactArithmetic(t *testing.T) {
	for _, c := range []struct {
		name       string
		opts       HostOptions
		contracted bool // plain a*b + c fused in some cases
		flushed    bool // subnormal products flushed
	}{
		{"ieee", HostOptions{}, false, false},
		{"apple/macos15", AppleHost(), true, true},
		{"apple/macos13", func() HostOptions { o := AppleHost(); o.Plan = PlanMacOS13; return o }(), true, true},
		{"contract/macos13", HostOptions{Contract: true, Plan: PlanMacOS13}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newHost(t, c.opts)
			r, err := ProbeArithmetic(e)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if !r.Exact() {
				t.Errorf("not exact: %v", r)
			}
			if got := r.Contracted > 0; got != c.contracted {
				t.Errorf("contracted %d of %d plain a*b+c (want contraction %v)", r.Contracted, r.N, c.contracted)
			}
			if got := r.FlushedProducts > 0; got != c.flushed {
				t.Errorf("flushed %d subnormal products (want flushing %v)", r.FlushedProducts, c.flushed)
			}
		})
	}
}

// TestExactArithmeticCatchesFusion: with contraction on, a rounding helper
// whose pragmas do not reach it (here, a probe whose "unfused" sum is
// written plainly) fuses, and the probe reports it.
func TestExactArithmeticCatchesFusion(t *testing.T) {
	body, err := unitBody("probe.kern")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(body, "o[1] = ADD_RN(MUL_RN(a[i], b[i]), c[i]);", "o[1] = a[i] * b[i] + c[i];", 1)
	if bad == body {
		t.Fatal("probe.kern changed: the mutation no longer applies")
	}
	e := newHost(t, HostOptions{Contract: true, Units: map[string]string{"probe.kern": bad}})
	r, err := ProbeArithmetic(e)
	if err != nil {
		t.Fatal(err)
	}
	if r.Exact() || r.UnfusedSums == r.N {
		t.Errorf("a fused sum passed the probe: %v", r)
	}
	if _, err := kernels.ParseSignatures("probe.kern", body); err != nil {
		t.Error(err)
	}
}
