package metal

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// CompilePlan is how the device engine has Apple's compiler build dgq's
// units on one kind of macOS: the language version it requests, the math
// options it sets, and the floating-point pragmas the units' text carries.
// The device engine picks the plan of the system it runs on when it opens
// (PlanMacOS15 where MTLCompileOptions has mathMode, else PlanMacOS13); the
// MSL check on Linux compiles every unit under every plan (Plans), with
// __METAL_VERSION__ as that plan's compiler defines it, and fails when a
// plan's pragmas do not reach the rounding helpers.
//
// Why two: MSL §1.6.3 documents `#pragma METAL fp math_mode(…)` and
// `#pragma METAL fp contract(…)` as features of the compiler of Xcode 16
// (macOS 15 and later), whatever the language version requested; an older
// compiler ignores them, with a warning. The standard C pragma
// `STDC FP_CONTRACT OFF` is honoured by every clang, Metal's included. So
// every plan turns contraction off with the standard pragma, and the macOS
// 15 plan adds Metal's own. Safe math is set through the API in both:
// mathMode Safe with the precise functions where that API exists (macOS
// 15), fastMathEnabled NO before (which Metal maps to the same,
// MTLCompileOptions.mathMode).
type CompilePlan struct {
	// Name is "macos13" (macOS 13 and 14) or "macos15" (15 and later).
	Name string
	// MinMacOS is the first macOS release the plan serves.
	MinMacOS int
	// Language is the Metal language version requested, as
	// MTLLanguageVersion encodes it (major<<16 | minor).
	Language uint
	// MathMode: set mathMode Safe and mathFloatingPointFunctions Precise
	// (the macOS 15 API) rather than fastMathEnabled NO.
	MathMode bool
	// FileScopePragmas open the unit (after "#pragma "); ContractPragmas open
	// the bodies of the prelude's MUL_RN and ADD_RN helpers, through
	// DGQ_NO_CONTRACT.
	FileScopePragmas, ContractPragmas []string
}

// The compile plans.
var (
	// PlanMacOS13 serves macOS 13 and 14: Metal 3.0, fastMathEnabled NO,
	// contraction off by the standard pragma.
	PlanMacOS13 = CompilePlan{Name: "macos13", MinMacOS: 13, Language: 3<<16 | 0,
		ContractPragmas: []string{"STDC FP_CONTRACT OFF"}}
	// PlanMacOS15 serves macOS 15 and later: Metal 3.2, mathMode Safe with
	// the precise functions, math_mode(safe) for the unit and contraction
	// off by the standard pragma and Metal's.
	PlanMacOS15 = CompilePlan{Name: "macos15", MinMacOS: 15, Language: 3<<16 | 2, MathMode: true,
		FileScopePragmas: []string{"METAL fp math_mode(safe)"},
		ContractPragmas:  []string{"STDC FP_CONTRACT OFF", "METAL fp contract(off)"}}
)

// Plans lists the compile plans the device engine may choose, oldest
// first.
func Plans() []CompilePlan { return []CompilePlan{PlanMacOS13, PlanMacOS15} }

// MetalVersion is __METAL_VERSION__ under the plan's language (300, 320).
func (p CompilePlan) MetalVersion() int {
	return int(p.Language>>16)*100 + int(p.Language&0xffff)*10
}

// LanguageString names the language version ("3.0", "3.2").
func (p CompilePlan) LanguageString() string {
	return fmt.Sprintf("%d.%d", p.Language>>16, p.Language&0xffff)
}

// Header is the text a unit compiled under the plan starts with: the
// file-scope pragmas and DGQ_NO_CONTRACT, which the Metal prelude requires.
func (p CompilePlan) Header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#line 1 \"plan %s (MSL %s)\"\n", p.Name, p.LanguageString())
	for _, pr := range p.FileScopePragmas {
		b.WriteString("#pragma " + pr + "\n")
	}
	b.WriteString("#define DGQ_NO_CONTRACT")
	for _, pr := range p.ContractPragmas {
		fmt.Fprintf(&b, " _Pragma(%q)", pr)
	}
	b.WriteString("\n")
	return b.String()
}

// UnitSourceFor returns the Metal translation unit of a kernel file under
// plan p: the plan's header, the Metal prelude, the common include, then
// the file (a dialect file of runtime/kernels or a Metal-specific one). An
// unknown name wraps ErrNoSource.
func UnitSourceFor(unit string, p CompilePlan) (string, error) {
	body, err := unitBody(unit)
	if err != nil {
		return "", err
	}
	return Unit(p, unit, body), nil
}

// Unit returns the Metal translation unit of a kernel source body named
// name under plan p (UnitSourceFor of a file's text).
func Unit(p CompilePlan, name, body string) string {
	return p.Header() + kernels.Unit(kernels.Prelude(kernels.Metal), name, body)
}

// SIMDWidth is the SIMD-group width every kernel assumes (the prelude's
// SIMD_WIDTH): the device engine refuses a pipeline of another
// threadExecutionWidth.
const SIMDWidth = 32

// pragmaWarnings matches a compiler warning about a pragma ("unknown pragma
// ignored", "pragma STDC FP_CONTRACT ignored", …).
var pragmaWarnings = regexp.MustCompile(`(?i)warning:[^\n]*pragma`)

// pragmaWarning reports whether a compiler log warns about a pragma: a
// plan's floating-point control that the compiler did not honour.
func pragmaWarning(log string) bool { return pragmaWarnings.MatchString(log) }
