package msl

import (
	"fmt"
	"strings"
	"testing"
)

func TestLineMap(t *testing.T) {
	unit := "a\n#line 2 \"p.h\"\nb\nc\n#line 1 \"k.kern\"\nd"
	lm := newLineMap(unit)
	tests := []struct {
		line int
		want string
	}{{1, "unit:1"}, {3, "p.h:2"}, {4, "p.h:3"}, {6, "k.kern:1"}, {99, "unit:99"}}
	for _, tc := range tests {
		if got := lm.at(tc.line).String(); got != tc.want {
			t.Errorf("line %d at %s, want %s", tc.line, got, tc.want)
		}
	}
}

func TestDemangle(t *testing.T) {
	tests := []struct{ in, want string }{
		{"_ZL8rms_factj", "rms_fact"},
		{"_Z3fooi", "foo"},
		{"_ZN5metal7precise4fmaxEff", "fmax"},
		{"_ZZ11softmax_f32E7partial", "softmax_f32::partial"},
		{"rmsnorm_f32", "rmsnorm_f32"},
		{`"odd name"`, "odd name"},
		{"_Z99x", "_Z99x"},
	}
	for _, tc := range tests {
		if got := demangle(tc.in); got != tc.want {
			t.Errorf("demangle(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScanSource(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // "" when the source passes
	}{
		{"clean", "#include <metal_stdlib>\n#pragma METAL fp math_mode(safe)\nfloat f(float x) { return x; }", ""},
		{"allowed pragmas", "#pragma METAL fp contract(off)\n#pragma unroll 4\n#pragma nounroll\n#pragma unroll", ""},
		{"attribute is no lambda", "void k(device float* x [[buffer(0)]]) { x[0] = x[1]; }", ""},
		{"words in comments and strings", "// goto new delete\nconst char* s = \"asm virtual\";", ""},
		{"goto", "\n\ngoto x;", "unit:3: error: Metal has no goto"},
		{"new", "int* p = new int;", "dynamic allocation (new)"},
		{"lambda", "auto f = [&](int a) { return a; };", "lambda"},
		{"_Pragma is for the preprocessed check", "#define N _Pragma(\"unroll\")", ""},
		{"asm", "__asm__(\"nop\");", "inline assembly"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lm := newLineMap(tc.src)
			pos, msg, ok := scanSource(tc.src, lm)
			got := ""
			if !ok {
				got = Diagnostic{Pos: pos, Severity: "error", Message: msg}.String()
			}
			if tc.want == "" && !ok || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("scanSource = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckPragmas reads preprocessed text as clang -E writes it: line
// markers, #pragma lines (a _Pragma expanded), the stand-in's lines skipped.
func TestCheckPragmas(t *testing.T) {
	helpers := "# 10 \"prelude_metal.h\"\nstatic inline float dgq_mul_rn(float a, float b) {\n%s return a * b;\n}\n" +
		"static inline float dgq_add_rn(float a, float b) {\n%s return a + b;\n}\n"
	both := "#pragma STDC FP_CONTRACT OFF\n# 11 \"prelude_metal.h\"\n#pragma METAL fp contract(off)\n# 11 \"prelude_metal.h\"\n"
	std := "#pragma STDC FP_CONTRACT OFF\n"
	file := "# 1 \"plan macos15 (MSL 3.2)\"\n#pragma METAL fp math_mode(safe)\n"
	stdlib := "# 1 \"/tmp/x/metal_stdlib\"\n#pragma clang diagnostic push\n"
	m13 := Target{MetalVersion: 300, Contract: []string{"STDC FP_CONTRACT OFF"}}
	m15 := Target{MetalVersion: 320, FileScope: []string{"METAL fp math_mode(safe)"}, Contract: []string{"STDC FP_CONTRACT OFF", "METAL fp contract(off)"}}
	tests := []struct {
		name string
		pp   string
		tgt  Target
		want string // "" when it passes
	}{
		{"macos13", stdlib + fmt.Sprintf(helpers, std, std), m13, ""},
		{"macos15", stdlib + file + fmt.Sprintf(helpers, both, both), m15, ""},
		{"macos15 pragmas under macos13", file + fmt.Sprintf(helpers, both, both), m13, ""},
		{"missing in add", fmt.Sprintf(helpers, std, ""), m13, `"STDC FP_CONTRACT OFF" does not open the body of dgq_add_rn`},
		{"metal's missing", file + fmt.Sprintf(helpers, std, std), m15, `"METAL fp contract(off)" does not open the body of dgq_mul_rn`},
		{"file scope missing", fmt.Sprintf(helpers, both, both), m15, "does not reach the unit's file scope"},
		{"file-scope pragma inside a function", fmt.Sprintf(helpers, both+"#pragma METAL fp math_mode(safe)\n", both), m15, "does not reach the unit's file scope"},
		{"no helpers", "float f(float x) { return x; }\n", m13, "no definition of dgq_mul_rn"},
		{"no helpers, no contract", "float f(float x) { return x; }\n", Target{MetalVersion: 300}, ""},
		{"other pragma", "# 3 \"k.kern\"\n\n#pragma once\n", Target{}, `k.kern:4: error: pragma "once"`},
		{"spacing folded", "#pragma  METAL  fp  contract ( off )\n", Target{}, ""},
		{"stdlib's own pragma", stdlib, Target{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := checkPragmas(tc.pp, tc.tgt, "metal_stdlib")
			got := ""
			if !ok {
				got = d.String()
			}
			if tc.want == "" && !ok || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("checkPragmas = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzCheckPragmas: the pragma scan of preprocessed text never panics, and
// a text it passes under a target with contraction pragmas defines both
// rounding helpers.
func FuzzCheckPragmas(f *testing.F) {
	f.Add("# 10 \"prelude_metal.h\"\nstatic inline float dgq_mul_rn(float a, float b) {\n#pragma STDC FP_CONTRACT OFF\n return a * b;\n}\n", true)
	f.Add("# 1 \"x\" 3\n#pragma METAL fp math_mode(safe)\n{{{}}}\n#line 7 \"k.kern\"\n#pragma unroll 4\n", false)
	f.Add("dgq_add_rn(float a, float b) { return a; }\n#pragma\n#", true)
	f.Fuzz(func(t *testing.T, pp string, contract bool) {
		tgt := Target{MetalVersion: 320, FileScope: []string{"METAL fp math_mode(safe)"}}
		if contract {
			tgt.Contract = []string{"STDC FP_CONTRACT OFF"}
		}
		if _, ok := checkPragmas(pp, tgt, "metal_stdlib"); ok && contract &&
			!(strings.Contains(pp, "dgq_mul_rn") && strings.Contains(pp, "dgq_add_rn")) {
			t.Errorf("passed without the rounding helpers: %q", pp)
		}
	})
}
