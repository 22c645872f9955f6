package msl

import (
	"github.com/dgq-dev/dgq/runtime/kernels"
	"regexp"
	"strconv"
	"strings"
)

// Scans of a unit's text for what clang would accept but Metal does not.

// Position is a place in a kernel source, as the unit's #line directives
// name it.
type Position struct {
	File string
	Line int
}

func (p Position) String() string {
	if p.File == "" {
		return strconv.Itoa(p.Line)
	}
	return p.File + ":" + strconv.Itoa(p.Line)
}

// lineMap maps the lines of a unit (from 1) to their positions.
type lineMap []Position

var lineDirective = regexp.MustCompile(`^\s*#\s*line\s+(\d+)(?:\s+"([^"]*)")?`)

// newLineMap follows the unit's #line directives; lines before the first
// belong to "unit".
func newLineMap(unit string) lineMap {
	lines := strings.Split(unit, "\n")
	m := make(lineMap, len(lines)+1)
	file, next := "unit", 1
	for i, l := range lines {
		if d := lineDirective.FindStringSubmatch(l); d != nil {
			n, _ := strconv.Atoi(d[1])
			if d[2] != "" {
				file = d[2]
			}
			m[i+1] = Position{file, next}
			next = n
			continue
		}
		m[i+1] = Position{file, next}
		next++
	}
	return m
}

// at returns the position of unit line n (from 1).
func (m lineMap) at(n int) Position {
	if n < 1 || n >= len(m) {
		return Position{"unit", n}
	}
	return m[n]
}

// forbiddenWords are C++ keywords for what Metal does not have.
var forbiddenWords = map[string]string{
	"goto":         "goto",
	"new":          "dynamic allocation (new)",
	"delete":       "dynamic allocation (delete)",
	"virtual":      "virtual functions",
	"thread_local": "thread_local storage",
	"register":     "the register storage class",
	"noexcept":     "noexcept",
	"typeid":       "type identification (typeid)",
	"asm":          "inline assembly",
	"__asm":        "inline assembly",
	"__asm__":      "inline assembly",
}

// lambda matches the start of a lambda expression in code: a bracket pair
// holding no bracket, then a parameter list or body (an attribute's double
// brackets never match: its inner pair is followed by a bracket).
var lambda = regexp.MustCompile(`\[[^\[\]]*\]\s*[({]`)

// scanSource returns the first construct Metal does not have in unit, with
// its position, or ok. (Pragmas are read from the preprocessed text:
// checkPragmas.)
func scanSource(unit string, lm lineMap) (Position, string, bool) {
	code := blankComments(unit)
	for i, l := range strings.Split(code, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			if d := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")); strings.HasPrefix(d, "include") || strings.HasPrefix(d, "line") {
				continue
			}
		}
		for _, w := range words(l) {
			if what, bad := forbiddenWords[w]; bad {
				return lm.at(i + 1), "Metal has no " + what, false
			}
		}
		if lambda.MatchString(l) {
			return lm.at(i + 1), "Metal has no lambda expressions", false
		}
	}
	return Position{}, "", true
}

// words returns the identifiers and keywords of a line of code.
func words(l string) []string {
	var ws []string
	for i := 0; i < len(l); {
		c := l[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			if c >= '0' && c <= '9' { // a number, with its suffix
				for i < len(l) && (l[i] == '_' || l[i] == '.' || l[i] >= '0' && l[i] <= '9' || l[i] >= 'a' && l[i] <= 'z' || l[i] >= 'A' && l[i] <= 'Z') {
					i++
				}
				continue
			}
			i++
			continue
		}
		j := i
		for j < len(l) && (l[j] == '_' || l[j] >= 'a' && l[j] <= 'z' || l[j] >= 'A' && l[j] <= 'Z' || l[j] >= '0' && l[j] <= '9') {
			j++
		}
		ws = append(ws, l[i:j])
		i = j
	}
	return ws
}

// blankComments returns src with comments and the contents of string and
// character literals replaced by spaces, newlines kept
// (kernels.BlankNonCode, directives left in place).
func blankComments(src string) string { return kernels.BlankNonCode(src, false) }
