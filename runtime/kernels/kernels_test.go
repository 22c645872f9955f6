package kernels

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	want := []string{"attention.kern", "attn_softmax.kern", "dequant.kern", "elementwise.kern", "probe.kern",
		"relayout.kern", "rmsnorm.kern", "rope.kern", "router.kern", "sampler.kern"}
	got := Files()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Files() = %v, want %v", got, want)
	}
	for _, f := range got {
		src, err := Source(f)
		if err != nil || !strings.Contains(src, "KERNEL(") {
			t.Errorf("Source(%q): %d bytes, %v; want a kernel file", f, len(src), err)
		}
	}
	if _, err := Source("nope.kern"); !errors.Is(err, ErrUnknownFile) {
		t.Errorf("Source(nope.kern) = %v, want ErrUnknownFile", err)
	}
}

func TestUnit(t *testing.T) {
	u, err := FileUnit("// PRELUDE\n", "rmsnorm.kern")
	if err != nil {
		t.Fatal(err)
	}
	p, c, k := strings.Index(u, "// PRELUDE"), strings.Index(u, "#line 1 \"common.h\""), strings.Index(u, "#line 1 \"rmsnorm.kern\"")
	if !(p == 0 && c > p && k > c) || !strings.Contains(u[c:k], "dgq_group_sum") {
		t.Errorf("unit out of order: prelude at %d, common at %d, file at %d", p, c, k)
	}
}

// TestOneDefinition checks that no kernel file defines a helper the common
// include defines (the include is prepended to every translation unit), and
// that no two kernel files define the same helper.
func TestOneDefinition(t *testing.T) {
	def := regexp.MustCompile(`(?m)^INLINE [^(]*?\b(\w+)\(`)
	seen := map[string]string{}
	for _, m := range def.FindAllStringSubmatch(Common(), -1) {
		seen[m[1]] = "common.h"
	}
	for _, f := range Files() {
		src, _ := Source(f)
		for _, m := range def.FindAllStringSubmatch(src, -1) {
			if other, ok := seen[m[1]]; ok {
				t.Errorf("%s defines %s, already in %s", f, m[1], other)
			}
			seen[m[1]] = f
		}
	}
	if len(seen) < 10 {
		t.Errorf("found %d helpers: the pattern no longer matches the sources", len(seen))
	}
}
