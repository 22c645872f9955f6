package kernels

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestSignaturesEveryFile parses every kernel file and checks the kernels
// against the list docs/cuda.md gives and against a plain count of KERNEL(
// at the start of a line.
func TestSignaturesEveryFile(t *testing.T) {
	want := map[string][]string{
		"attention.kern":    {"softmax_f32", "attn_tiles_f32", "attn_probs_f32"},
		"attn_softmax.kern": {"attn_softmax_f32", "attn_permute_f32"},
		"dequant.kern": {"dequant_q4_f32", "widen_bf16_f32", "widen_f16_f32", "dequant_q8_f32", "dequant_affine_f32",
			"dequant_nvfp4_f32", "embed_f32"},
		"elementwise.kern": {"add_scale_f32", "scale_f32", "temper_f32", "round_bf16_f32", "gelu_mul_f32"},
		"probe.kern":       {"probe_arith_f32"},
		"relayout.kern":    {"relayout_affine", "relayout_q8", "relayout_nvfp4"},
		"rmsnorm.kern":     {"rmsnorm_f32", "rmsnorm_unscaled_f32"},
		"rope.kern":        {"rope_f32", "softcap_f32", "row_stats_f32"},
		"router.kern": {"moe_router_norm_f32", "moe_topk_f32", "moe_count_u32", "moe_scatter_u32", "moe_expert_f32",
			"moe_combine_f32"},
		"sampler.kern": {"categorical_f32"},
	}
	decl := regexp.MustCompile(`(?m)^KERNEL\(`)
	for _, f := range Files() {
		sigs, err := Signatures(f)
		if err != nil {
			t.Errorf("Signatures(%q): %v", f, err)
			continue
		}
		var names []string
		for _, s := range sigs {
			names = append(names, s.Name)
			for i, p := range s.Params {
				if _, ok := TypeSize(p.Type); !ok || p.Index != i {
					t.Errorf("%s %s: parameter %d = %+v", f, s.Name, i, p)
				}
			}
		}
		if !reflect.DeepEqual(names, want[f]) {
			t.Errorf("Signatures(%q) names = %v, want %v", f, names, want[f])
		}
		src, _ := Source(f)
		if n := len(decl.FindAllString(src, -1)); n != len(sigs) {
			t.Errorf("%s: %d lines start with KERNEL(, %d signatures", f, n, len(sigs))
		}
	}
	if _, err := Signatures("nope.kern"); !errors.Is(err, ErrUnknownFile) {
		t.Errorf("Signatures(nope.kern) = %v, want ErrUnknownFile", err)
	}
}

func TestSignatureRMSNorm(t *testing.T) {
	sigs, err := Signatures("rmsnorm.kern")
	if err != nil {
		t.Fatal(err)
	}
	want := Signature{Name: "rmsnorm_f32", Line: 8, Params: []Param{
		{CBuf, "float", "x", 0}, {CBuf, "float", "w", 1}, {Buf, "float", "y", 2},
		{Scalar, "u32", "n", 3}, {Scalar, "float", "eps", 4},
	}}
	if !reflect.DeepEqual(sigs[0], want) {
		t.Errorf("rmsnorm_f32 = %+v, want %+v", sigs[0], want)
	}
	if got := sigs[0].String(); got != "KERNEL(rmsnorm_f32, CBUF(float, x, 0), CBUF(float, w, 1), BUF(float, y, 2), SCALAR(u32, n, 3), SCALAR(float, eps, 4))" {
		t.Errorf("String() = %s", got)
	}
}

func TestParseSignatures(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // the kernels' names joined by ",", or the error's text
		wantErr   bool
	}{
		{"empty", "", "", false},
		{"two", "KERNEL(a, BUF(float, x, 0)) {}\nKERNEL(b, SCALAR(u64, n, 0), CBUF(u8, c, 1)) { }", "a,b", false},
		{"spaces", "KERNEL ( a ,\n\tBUF ( float , x , 0 ) )\n{}", "a", false},
		{"comments", "// KERNEL(x\n/* KERNEL( */ KERNEL(a, BUF(i32, x, 0)) {}", "a", false},
		{"directive", "#define K KERNEL(\\\n  broken\nKERNEL(a, BUF(u16, x, 0)) {}", "a", false},
		{"string", `const char* s = "KERNEL(";` + "\nKERNEL(a, BUF(i64, x, 0)) {}", "a", false},
		{"index out of order", "KERNEL(a, BUF(float, x, 1)) {}", "index 1 at position 0", true},
		{"unknown type", "KERNEL(a, BUF(double, x, 0)) {}", `type "double"`, true},
		{"unknown kind", "KERNEL(a, TEX(float, x, 0)) {}", "is not BUF, CBUF or SCALAR", true},
		{"two fields", "KERNEL(a, BUF(float, x)) {}", "want BUF(T, name, index)", true},
		{"no params", "KERNEL(a) {}", "has 0 parameters", true},
		{"duplicate param", "KERNEL(a, BUF(float, x, 0), CBUF(float, x, 1)) {}", "parameter x twice", true},
		{"duplicate kernel", "KERNEL(a, BUF(float, x, 0)) {}\nKERNEL(a, BUF(float, x, 0)) {}", ":2: kernel a declared twice", true},
		{"reserved name", "KERNEL(a, BUF(float, dgq_lid, 0)) {}", "outside dgq_*", true},
		{"bad name", "KERNEL(a b, BUF(float, x, 0)) {}", "not an identifier", true},
		{"signed index", "KERNEL(a, BUF(float, x, +0)) {}", "not a decimal integer", true},
		{"unclosed", "KERNEL(a, BUF(float, x, 0) {}", "closing parenthesis", true},
		{"no body", "KERNEL(a, BUF(float, x, 0));", "not followed by its body", true},
		{"bare", "int KERNEL;", "not followed by (", true},
		{"line", "\n\n\nKERNEL(a, BUF(float, x, 9)) {}", "t.kern:4:", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sigs, err := ParseSignatures("t.kern", tc.src)
			if tc.wantErr {
				if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrSignature containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range sigs {
				names = append(names, s.Name)
			}
			if got := strings.Join(names, ","); got != tc.want {
				t.Errorf("kernels = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParamKindString(t *testing.T) {
	for k, want := range map[ParamKind]string{Buf: "BUF", CBuf: "CBUF", Scalar: "SCALAR", 0: "ParamKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// FuzzParseSignatures checks that the parser never panics, that its errors
// wrap ErrSignature, and that what it accepts is well formed and survives a
// round trip through Signature.String.
func FuzzParseSignatures(f *testing.F) {
	for _, name := range Files() {
		src, _ := Source(name)
		f.Add(src)
	}
	f.Add("KERNEL(a, BUF(float, x, 0)) {}")
	f.Add("/* */ KERNEL(a, SCALAR(u32, n, 0), CBUF(u8, c, 1)) {}\n#define X \\\n KERNEL(")
	f.Fuzz(func(t *testing.T, src string) {
		sigs, err := ParseSignatures("fuzz.kern", src)
		if err != nil {
			if !errors.Is(err, ErrSignature) {
				t.Fatalf("error %v does not wrap ErrSignature", err)
			}
			return
		}
		var b strings.Builder
		for _, s := range sigs {
			if !isIdent(s.Name) || len(s.Params) == 0 || len(s.Params) > MaxParams {
				t.Fatalf("accepted %+v", s)
			}
			for i, p := range s.Params {
				if _, ok := TypeSize(p.Type); !ok || p.Index != i || !isIdent(p.Name) || p.Kind < Buf || p.Kind > Scalar {
					t.Fatalf("accepted parameter %+v of %s", p, s.Name)
				}
			}
			b.WriteString(s.String())
			b.WriteString(" {}\n")
		}
		again, err := ParseSignatures("again.kern", b.String())
		if err != nil {
			t.Fatalf("round trip of %q: %v", b.String(), err)
		}
		if len(again) != len(sigs) {
			t.Fatalf("round trip: %d kernels, want %d", len(again), len(sigs))
		}
		for i := range sigs {
			if again[i].Name != sigs[i].Name || !reflect.DeepEqual(again[i].Params, sigs[i].Params) {
				t.Fatalf("round trip: %+v, want %+v", again[i], sigs[i])
			}
		}
	})
}
