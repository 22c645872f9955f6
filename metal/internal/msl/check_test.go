package msl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/metal"
	"github.com/dgq-dev/dgq/metal/internal/msl"
	"github.com/dgq-dev/dgq/metal/internal/msl/msltest"
	"github.com/dgq-dev/dgq/runtime/kernels"
)

func checkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// target is the check's target for a compile plan of the device engine.
func target(p metal.CompilePlan) msl.Target {
	return msl.Target{MetalVersion: p.MetalVersion(), FileScope: p.FileScopePragmas, Contract: p.ContractPragmas}
}

// TestCheckEveryFile: every kernel file of the dialect, and every
// Metal-specific kernel file of package metal (metal/kernels/*.metal), is
// valid under the Metal prelude in the exact text the device engine hands
// Apple's compiler under each compile plan it may choose (metal.Plans), with
// __METAL_VERSION__ as that plan's language defines it and the plan's
// pragmas reaching the compiler.
func TestCheckEveryFile(t *testing.T) {
	msltest.Require(t)
	ctx := checkCtx(t)
	if len(metal.MetalFiles()) == 0 {
		t.Error("package metal has no Metal kernel files")
	}
	if len(metal.Plans()) < 2 {
		t.Errorf("compile plans %v", metal.Plans())
	}
	for _, p := range metal.Plans() {
		for _, f := range append(kernels.Files(), metal.MetalFiles()...) {
			t.Run(p.Name+"/"+f, func(t *testing.T) {
				t.Parallel()
				u, err := metal.UnitSourceFor(f, p)
				if err != nil {
					t.Fatal(err)
				}
				if err := msl.Check(ctx, u, target(p)); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// planMutations are ways a compile plan's pragmas can fail to reach the
// compiler, injected into rmsnorm.kern's unit: the check must catch each
// under the plan named, at pos.
var planMutations = []struct {
	mutation
	plan metal.CompilePlan
}{
	{mutation{"contraction pragma compiled out for Metal 3.0", []rep{{"INLINE float dgq_mul_rn(float a, float b) {\n\tDGQ_NO_CONTRACT",
		"INLINE float dgq_mul_rn(float a, float b) {\n#if __METAL_VERSION__ >= 320\n\tDGQ_NO_CONTRACT\n#endif"}},
		`contraction pragma "STDC FP_CONTRACT OFF" does not open the body of dgq_mul_rn`, "prelude_metal.h:"}, metal.PlanMacOS13},
	{mutation{"contraction pragma compiled out for Metal 3.2", []rep{{"INLINE float dgq_add_rn(float a, float b) {\n\tDGQ_NO_CONTRACT",
		"INLINE float dgq_add_rn(float a, float b) {\n#if __METAL_VERSION__ < 320\n\tDGQ_NO_CONTRACT\n#endif"}},
		`does not open the body of dgq_add_rn`, "prelude_metal.h:"}, metal.PlanMacOS15},
	{mutation{"Metal's pragma dropped from the plan", []rep{{` _Pragma("METAL fp contract(off)")`, ""}},
		`contraction pragma "METAL fp contract(off)" does not open the body of dgq_mul_rn`, "prelude_metal.h:"}, metal.PlanMacOS15},
	{mutation{"pragma after the first statement", []rep{{"INLINE float dgq_mul_rn(float a, float b) {\n\tDGQ_NO_CONTRACT\n\treturn a * b;",
		"INLINE float dgq_mul_rn(float a, float b) {\n\tfloat r = a * b;\n\tDGQ_NO_CONTRACT\n\treturn r;"}},
		`does not open the body of dgq_mul_rn`, "prelude_metal.h:"}, metal.PlanMacOS13},
	{mutation{"math mode compiled out", []rep{{"#pragma METAL fp math_mode(safe)", "#if __METAL_VERSION__ >= 400\n#pragma METAL fp math_mode(safe)\n#endif"}},
		`pragma "METAL fp math_mode(safe)" does not reach the unit's file scope`, "unit:1"}, metal.PlanMacOS15},
	{mutation{"no plan header", []rep{{"#define DGQ_NO_CONTRACT", "#define DGQ_NOT_THE_MACRO"}},
		"a Metal unit starts with its compile plan's header", "prelude_metal.h:"}, metal.PlanMacOS13},
	{mutation{"fast math in a kernel", []rep{{"KERNEL(rmsnorm_f32,", "#pragma METAL fp math_mode(fast)\nKERNEL(rmsnorm_f32,"}},
		`pragma "METAL fp math_mode(fast)" is not one Metal units may use`, "rmsnorm.kern:"}, metal.PlanMacOS15},
	{mutation{"contraction turned on in a kernel", []rep{{"KERNEL(rmsnorm_f32,", "#pragma STDC FP_CONTRACT ON\nKERNEL(rmsnorm_f32,"}},
		`pragma "STDC FP_CONTRACT ON" is not one Metal units may use`, "rmsnorm.kern:"}, metal.PlanMacOS13},
}

// TestCheckPlanMutations: a compile plan's pragma that does not reach the
// compiler — compiled out for the plan's language version, dropped, placed
// after a statement, the header missing — or a kernel that loosens the
// floating-point controls is caught, under that plan.
func TestCheckPlanMutations(t *testing.T) {
	msltest.Require(t)
	ctx := checkCtx(t)
	for _, pm := range planMutations {
		base, err := metal.UnitSourceFor("rmsnorm.kern", pm.plan)
		if err != nil {
			t.Fatal(err)
		}
		checkMutationsWith(t, ctx, base, target(pm.plan), []mutation{pm.mutation})
	}
}

// gemmMutations are mistakes in the use of SIMD-group matrices, injected
// into gemm.metal's unit: the check accepts only the form the host engine
// models (a pointer at the matrix, a row stride; no origin, no transpose),
// keeps the matrices opaque, and keeps address spaces and constness.
var gemmMutations = []mutation{
	{"transposed load", []rep{{"simdgroup_load(fa[i], as + (sm + 8u * i) * GM_BK + l, GM_BK);",
		"simdgroup_load(fa[i], as + (sm + 8u * i) * GM_BK + l, GM_BK, ulong2(0), true);"}}, "no matching function for call to 'simdgroup_load'", "gemm.metal:"},
	{"an element of a matrix", []rep{{"\t\tBARRIER();\n\t\tfor (u32 q = 0; q < 8u; q++) tot[q]", "\t\tBARRIER();\n\t\tpart[0] = acc[0][0].dgq_opaque[0];\n\t\tfor (u32 q = 0; q < 8u; q++) tot[q]"}},
		"'dgq_opaque' is a private member", "gemm.metal:"},
	{"store through a read-only pointer", []rep{{"simdgroup_store(acc[i][jj], part + (sm + 8u * i) * GM_BN + sn + 8u * jj, GM_BN);",
		"simdgroup_store(acc[i][jj], a + (sm + 8u * i) * GM_BN + sn + 8u * jj, GM_BN);"}}, "no matching function for call to 'simdgroup_store'", "gemm.metal:"},
	{"load from thread memory", []rep{{"simdgroup_float8x8 fa[2];", "simdgroup_float8x8 fa[2];\n\t\t\tfloat loc[64] = {0.0f};"},
		{"simdgroup_load(fa[i], as + (sm + 8u * i) * GM_BK + l, GM_BK);", "simdgroup_load(fa[i], loc, 8u);"}}, "no matching function for call to 'simdgroup_load'", "gemm.metal:"},
}

// TestCheckSimdgroupMutations: each mistake of gemmMutations is caught at
// its place.
func TestCheckSimdgroupMutations(t *testing.T) {
	msltest.Require(t)
	ctx := checkCtx(t)
	base, err := metal.UnitSourceFor("gemm.metal", metal.PlanMacOS15)
	if err != nil {
		t.Fatal(err)
	}
	checkMutations(t, ctx, base, gemmMutations)
}

// rep is one textual change of a unit.
type rep struct{ old, new string }

// mutation is a mistake injected into a unit by reps, which the check must
// reject with an error naming want, its first diagnostic at a position
// starting with pos.
type mutation struct {
	name string
	reps []rep
	want string
	pos  string
}

// checkMutations applies each mutation to base (a unit of PlanMacOS15) and
// checks the refusal.
func checkMutations(t *testing.T, ctx context.Context, base string, muts []mutation) {
	t.Helper()
	checkMutationsWith(t, ctx, base, target(metal.PlanMacOS15), muts)
}

// checkMutationsWith applies each mutation to base and checks the refusal
// under tgt.
func checkMutationsWith(t *testing.T, ctx context.Context, base string, tgt msl.Target, muts []mutation) {
	t.Helper()
	for _, tc := range muts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := base
			for _, r := range tc.reps {
				if !strings.Contains(u, r.old) {
					t.Fatalf("the unit lacks %q: the mutation no longer applies", r.old)
				}
				u = strings.Replace(u, r.old, r.new, 1)
			}
			err := msl.Check(ctx, u, tgt)
			var me *msl.Error
			if !errors.Is(err, msl.ErrMSL) || !errors.As(err, &me) {
				t.Fatalf("Check = %v, want an *msl.Error wrapping ErrMSL", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name %q:\n%v\n%s", tc.want, err, me.Log)
			}
			if len(me.Diagnostics) == 0 || !strings.HasPrefix(me.Diagnostics[0].Pos.String(), tc.pos) {
				t.Errorf("first diagnostic %v, want it at %s", me.Diagnostics, tc.pos)
			}
		})
	}
}

// mutations are mistakes injected into rmsnorm.kern's Metal unit; the check
// must reject each with an error naming want, at pos.
var mutations = []mutation{
	{"CUDA barrier", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\t__syncthreads();\n\tu64 row"}},
		"'__syncthreads'", "rmsnorm.kern:10"},
	{"CUDA math", []rep{{"#define SQRT(x) precise::sqrt(x)", "#define SQRT(x) sqrtf(x)"}}, "'sqrtf'", "common.h:"},
	{"double", []rep{{"\tfloat inv = dgq_rms_inv(x + row", "\tdouble inv = dgq_rms_inv(x + row"}},
		"dgq_metal_has_no_double", "rmsnorm.kern:11"},
	{"pointer without address space", []rep{{"INLINE float dgq_rms_inv(const DEVICE_MEM float* x,", "INLINE float dgq_rms_inv(const float* x,"}},
		"no matching function for call to 'dgq_rms_inv'", "rmsnorm.kern:"},
	{"threadgroup pointer as device", []rep{{"dgq_rms_inv(x + row, n, eps, partial,", "dgq_rms_inv(partial, n, eps, partial,"}},
		"no matching function for call to 'dgq_rms_inv'", "rmsnorm.kern:11"},
	{"write through const device", []rep{{"\t\ty[row + i] = MUL_RN(MUL_RN(x[row + i], inv), w[i]);", "\t\tx[row + i] = inv;"}},
		"read-only variable is not assignable", "rmsnorm.kern:13"},
	{"write to a scalar", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\tn = 1u;\n\tu64 row"}},
		"cannot assign to variable 'n'", "rmsnorm.kern:10"},
	{"unknown attribute", []rep{{"[[buffer(idx)]]\n#define CBUF", "[[buffer_index(idx)]]\n#define CBUF"}},
		"unknown attribute 'buffer_index'", "rmsnorm.kern:8"},
	{"misspelled builtin", []rep{{"return simd_sum(v);", "return simd_summ(v);"}}, "'simd_summ'", "prelude_metal.h:"},
	{"recursion", []rep{
		{"KERNEL(rmsnorm_f32,", "INLINE u32 rms_fact(u32 k) { return k < 2u ? 1u : k * rms_fact(k - 1u); }\nKERNEL(rmsnorm_f32,"},
		{"u64 row = (u64)GROUP_ID_X * n;", "u64 row = (u64)GROUP_ID_X * n * rms_fact(1u);"}},
		"recursion: rms_fact → rms_fact", "rmsnorm.kern:8"},
	{"function pointer", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\tfloat (*fp)(float) = dgq_simd_sum;\n\tfp(1.0f);\n\tu64 row"}},
		"function pointers", "rmsnorm.kern:8"},
	{"SHARED in a helper", []rep{{"u32 nthreads, u32 lane, u32 simd) {\n", "u32 nthreads, u32 lane, u32 simd) {\n\tSHARED(float, extra, 4);\n\textra[0] = 0.0f;\n"}},
		"'dgq_lid'", "common.h:"},
	{"half as a name", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\tu32 half = 2u;\n\tu64 row"}},
		"cannot combine with previous", "rmsnorm.kern:10"},
	{"as_type of another size", []rep{{"\tfloat inv = dgq_rms_inv(x + row", "\ty[0] = as_type<float>((u64)n);\n\tfloat inv = dgq_rms_inv(x + row"}},
		"as_type: the types differ in size", "metal_stdlib:"},
	{"program-scope variable", []rep{
		{"KERNEL(rmsnorm_f32,", "static float rms_calls;\nKERNEL(rmsnorm_f32,"},
		{"u64 row = (u64)GROUP_ID_X * n;", "u64 row = (u64)GROUP_ID_X * n;\n\trms_calls += 1.0f;"}},
		"at program scope", "rmsnorm.kern:8"},
	{"pragma typo", []rep{{`_Pragma("METAL fp contract(off)")`, `_Pragma("METAL fp contrct(off)")`}}, `pragma "METAL fp contrct(off)"`, "prelude_metal.h:"},
	{"goto", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\tgoto out;\nout:\n\tu64 row"}},
		"Metal has no goto", "rmsnorm.kern:10"},
	{"lambda", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\tauto sq = [](float a) { return a * a; };\n\tu64 row"}},
		"lambda", "rmsnorm.kern:10"},
	{"inline assembly", []rep{{"\tSHARED(float, partial, 32);\n\tu64 row", "\tSHARED(float, partial, 32);\n\tasm(\"nop\");\n\tu64 row"}},
		"inline assembly", "rmsnorm.kern:10"},
	{"implicit narrowing", []rep{{"\tfloat inv = dgq_rms_inv(x + row", "\tu32 lo = row;\n\tfloat inv = dgq_rms_inv(x + row"}},
		"implicit conversion loses integer precision", "rmsnorm.kern:11"},
	{"libc include", []rep{{"#include <metal_stdlib>", "#include <metal_stdlib>\n#include <math.h>"}}, "'math.h' file not found", "prelude_metal.h:"},
}

// TestCheckMutations is the check's self-test: every injected mistake is
// caught, and named at its place.
func TestCheckMutations(t *testing.T) {
	msltest.Require(t)
	ctx := checkCtx(t)
	base, err := metal.UnitSourceFor("rmsnorm.kern", metal.PlanMacOS15)
	if err != nil {
		t.Fatal(err)
	}
	checkMutations(t, ctx, base, mutations)
	if len(mutations) < 7 {
		t.Errorf("%d mutations; the self-test wants at least 7", len(mutations))
	}
}

// TestCheckCanceled: a canceled context stops the check with ctx's error.
func TestCheckCanceled(t *testing.T) {
	msltest.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u, _ := metal.UnitSourceFor("rmsnorm.kern", metal.PlanMacOS13)
	if err := msl.Check(ctx, u, target(metal.PlanMacOS13)); !errors.Is(err, context.Canceled) {
		t.Errorf("Check(canceled) = %v, want context.Canceled", err)
	}
}

func TestErrNoClangSaysHowToInstall(t *testing.T) {
	if !strings.Contains(msl.ErrNoClang.Error(), "apt-get install -y clang-19") {
		t.Errorf("ErrNoClang = %q: it must give the fix", msl.ErrNoClang)
	}
}
