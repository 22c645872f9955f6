package metal

import (
	"strings"
	"testing"
)

// The compile plans: the macOS 13 plan's text carries the standard
// contraction pragma only, the macOS 15 plan's Metal's own too and the safe
// math mode for the unit; __METAL_VERSION__ follows the language.
func TestCompilePlans(t *testing.T) {
	for _, c := range []struct {
		p       CompilePlan
		version int
		lang    string
		want    []string
		not     []string
	}{
		{PlanMacOS13, 300, "3.0", []string{`#define DGQ_NO_CONTRACT _Pragma("STDC FP_CONTRACT OFF")` + "\n"}, []string{"METAL fp"}},
		{PlanMacOS15, 320, "3.2", []string{"#pragma METAL fp math_mode(safe)\n",
			`#define DGQ_NO_CONTRACT _Pragma("STDC FP_CONTRACT OFF") _Pragma("METAL fp contract(off)")` + "\n"}, nil},
	} {
		h := c.p.Header()
		if c.p.MetalVersion() != c.version || c.p.LanguageString() != c.lang || !strings.HasPrefix(h, "#line 1 \"plan "+c.p.Name) {
			t.Errorf("%s: version %d, language %s, header %q", c.p.Name, c.p.MetalVersion(), c.p.LanguageString(), h)
		}
		for _, w := range c.want {
			if !strings.Contains(h, w) {
				t.Errorf("%s: header %q lacks %q", c.p.Name, h, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(h, n) {
				t.Errorf("%s: header %q holds %q", c.p.Name, h, n)
			}
		}
	}
	if p := Plans(); len(p) != 2 || p[0].Name != "macos13" || p[1].Name != "macos15" || p[0].MathMode || !p[1].MathMode {
		t.Errorf("Plans() = %+v", p)
	}
}

// A compiler warning about a pragma fails the unit; other warnings do not.
func TestPragmaWarning(t *testing.T) {
	for _, c := range []struct {
		log  string
		want bool
	}{
		{"", false},
		{"program_source:12:9: warning: unknown pragma ignored [-Wunknown-pragmas]", true},
		{"program_source:3:1: warning: pragma STDC FP_CONTRACT ignored", true},
		{"program_source:40:7: warning: unused variable 'x' [-Wunused-variable]", false},
		{"program_source:40:7: error: pragma in the wrong place", false},
		{"line one\nprogram_source:2:2: Warning: '#pragma METAL fp contract' is not supported", true},
	} {
		if got := pragmaWarning(c.log); got != c.want {
			t.Errorf("pragmaWarning(%q) = %v, want %v", c.log, got, c.want)
		}
	}
}
