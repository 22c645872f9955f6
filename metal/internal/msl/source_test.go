package msl

import (
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
		{"other pragma", "#pragma once", `pragma "once"`},
		{"goto", "\n\ngoto x;", "unit:3: error: Metal has no goto"},
		{"new", "int* p = new int;", "dynamic allocation (new)"},
		{"lambda", "auto f = [&](int a) { return a; };", "lambda"},
		{"_Pragma", "_Pragma(\"unroll\")", "_Pragma"},
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
