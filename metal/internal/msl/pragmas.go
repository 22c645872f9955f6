package msl

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// The pragmas of a unit, read from clang's preprocessed output (-E): what
// the compiler sees once every #if has been decided and every _Pragma
// expanded, so a pragma compiled out for a language version is missing
// there, where it can be caught.

// Target is what a unit is checked for: a compile plan of the device engine
// (metal.CompilePlan) — the language version it requests, and the pragmas
// it must get to Apple's compiler.
type Target struct {
	// MetalVersion is __METAL_VERSION__ as the plan's compiler defines it
	// (300 for Metal 3.0, 320 for 3.2).
	MetalVersion int
	// FileScope are the pragmas (the text after "#pragma ") the unit must
	// hold at file scope; Contract those that must open the bodies of the
	// prelude's rounding helpers, dgq_mul_rn and dgq_add_rn (MUL_RN and
	// ADD_RN).
	FileScope, Contract []string
}

// allowedPragmas are the pragmas a unit may hold (after "#pragma "): the
// floating-point controls that keep the contract — Safe math, contraction
// off — and loop unrolling.
var allowedPragmas = regexp.MustCompile(`^(METAL\s+fp\s+math_mode\s*\(\s*safe\s*\)|` +
	`METAL\s+fp\s+contract\s*\(\s*off\s*\)|STDC\s+FP_CONTRACT\s+OFF|unroll(\s*\(?\s*\d+\s*\)?)?|nounroll)\s*$`)

// roundingHelpers are the functions whose bodies Target.Contract's pragmas
// must open.
var roundingHelpers = []string{"dgq_mul_rn", "dgq_add_rn"}

var (
	lineMarker = regexp.MustCompile(`^#\s*(?:line\s+)?(\d+)\s+"([^"]*)"`)
	ppPragma   = regexp.MustCompile(`^\s*#\s*pragma\s+(.*?)\s*$`)
	helperDef  = regexp.MustCompile(`\b(dgq_mul_rn|dgq_add_rn)\s*\(\s*float\s+\w+\s*,\s*float\s+\w+\s*\)\s*\{`)
)

// normPragma folds a pragma's whitespace, so that targets and text compare.
func normPragma(p string) string {
	p = strings.Join(strings.Fields(p), " ")
	p = strings.ReplaceAll(p, " (", "(")
	return strings.ReplaceAll(strings.ReplaceAll(p, "( ", "("), " )", ")")
}

// checkPragmas reads pp, clang's preprocessed output of a unit, and returns
// the first finding: a pragma outside the allow-list, a Target.FileScope
// pragma missing at file scope, or a Target.Contract pragma missing from a
// rounding helper's body (compiled out, or never written). Positions are
// the unit's (the preprocessor's line markers); lines of metal_stdlib (the
// stand-in, file stdlibName) are not the unit's and are skipped.
func checkPragmas(pp string, tgt Target, stdlibName string) (Diagnostic, bool) {
	pos := Position{File: "unit", Line: 1}
	code := kernels.BlankNonCode(pp, false)
	lines := strings.Split(pp, "\n")
	codeLines := strings.Split(code, "\n")
	depth := 0
	fileScope := map[string]bool{}
	helpers := map[string]Position{}
	var inHelper string          // the helper whose leading pragmas are being read
	got := map[string][]string{} // helper → its leading pragmas
	for i, l := range lines {
		if m := lineMarker.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			pos = Position{File: m[2], Line: n}
			continue
		}
		here := pos
		pos.Line++
		own := !strings.HasSuffix(here.File, stdlibName)
		if m := ppPragma.FindStringSubmatch(l); m != nil {
			p := normPragma(m[1])
			if !own {
				continue
			}
			if !allowedPragmas.MatchString(p) {
				return Diagnostic{Pos: here, Severity: "error", Message: "pragma \"" + p + "\" is not one Metal units may use " +
					"(METAL fp math_mode(safe), METAL fp contract(off), STDC FP_CONTRACT OFF, unroll)"}, false
			}
			if depth == 0 {
				fileScope[p] = true
			}
			if inHelper != "" {
				got[inHelper] = append(got[inHelper], p)
			}
			continue
		}
		c := codeLines[i]
		if own {
			if m := helperDef.FindStringSubmatch(c); m != nil && depth == 0 {
				inHelper = m[1]
				helpers[inHelper] = here
				if rest := c[strings.Index(c, "{")+1:]; strings.TrimSpace(rest) != "" {
					inHelper = "" // a statement on the line of the brace: no pragma can come first
				}
				depth += strings.Count(c, "{") - strings.Count(c, "}")
				continue
			}
			if inHelper != "" && strings.TrimSpace(c) != "" {
				inHelper = "" // the body's first statement: the leading pragmas end
			}
		}
		depth += strings.Count(c, "{") - strings.Count(c, "}")
	}
	for _, p := range tgt.FileScope {
		if !fileScope[normPragma(p)] {
			return Diagnostic{Pos: Position{File: "unit", Line: 1}, Severity: "error",
				Message: "the compile plan's pragma \"" + p + "\" does not reach the unit's file scope (compiled out for __METAL_VERSION__ " +
					strconv.Itoa(tgt.MetalVersion) + "?)"}, false
		}
	}
	for _, h := range roundingHelpers {
		at, ok := helpers[h]
		if !ok {
			if len(tgt.Contract) == 0 {
				continue
			}
			return Diagnostic{Pos: Position{File: "unit", Line: 1}, Severity: "error",
				Message: "no definition of " + h + " (the prelude's rounding helper) for the compile plan's contraction pragmas"}, false
		}
		for _, p := range tgt.Contract {
			found := false
			for _, q := range got[h] {
				found = found || q == normPragma(p)
			}
			if !found {
				return Diagnostic{Pos: at, Severity: "error", Message: "the compile plan's contraction pragma \"" + p +
					"\" does not open the body of " + h + " (compiled out for __METAL_VERSION__ " + strconv.Itoa(tgt.MetalVersion) + "?)"}, false
			}
		}
	}
	return Diagnostic{}, true
}
