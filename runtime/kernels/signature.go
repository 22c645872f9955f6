package kernels

import (
	"fmt"
	"strconv"
	"strings"
)

// Kernel signatures. A kernel is declared KERNEL(name, params...) where each
// parameter is BUF(T, name, i), CBUF(T, name, i) or SCALAR(T, name, i): i is
// the Metal buffer index, which must be the parameter's position (0, 1, …),
// and T one of the dialect's types. A backend that generates code around the
// kernels (the Metal host engine's launchers) or binds their arguments reads
// them once, checked, with Signatures instead of parsing the text itself.

// ParamKind is how a kernel parameter is bound.
type ParamKind uint8

// The kinds of kernel parameter.
const (
	// Buf is BUF(T, name, i): a read-write array of T.
	Buf ParamKind = iota + 1
	// CBuf is CBUF(T, name, i): a read-only array of T.
	CBuf
	// Scalar is SCALAR(T, name, i): one T passed by value.
	Scalar
)

// String is the kind's dialect macro ("BUF", "CBUF", "SCALAR").
func (k ParamKind) String() string {
	switch k {
	case Buf:
		return "BUF"
	case CBuf:
		return "CBUF"
	case Scalar:
		return "SCALAR"
	}
	return fmt.Sprintf("ParamKind(%d)", uint8(k))
}

// paramKinds maps the dialect's parameter macros to their kinds.
var paramKinds = map[string]ParamKind{"BUF": Buf, "CBUF": CBuf, "SCALAR": Scalar}

// typeSizes are the dialect's types and their sizes in bytes.
var typeSizes = map[string]int{"float": 4, "u8": 1, "u16": 2, "u32": 4, "i32": 4, "u64": 8, "i64": 8}

// TypeSize returns the size in bytes of a dialect type ("float", "u8", "u16",
// "u32", "i32", "u64", "i64") and whether t is one.
func TypeSize(t string) (int, bool) {
	n, ok := typeSizes[t]
	return n, ok
}

// MaxParams is the most parameters a kernel may have: Metal's buffer
// argument table has 31 entries.
const MaxParams = 31

// Param is one kernel parameter.
type Param struct {
	Kind  ParamKind
	Type  string // a dialect type (TypeSize)
	Name  string
	Index int // the Metal buffer index: the parameter's position
}

// Signature is one kernel's declaration.
type Signature struct {
	Name   string
	Params []Param
	Line   int // the line of its KERNEL in the file, from 1
}

// String writes the declaration back in the dialect:
// KERNEL(name, BUF(float, x, 0), …).
func (s Signature) String() string {
	var b strings.Builder
	b.WriteString("KERNEL(")
	b.WriteString(s.Name)
	for _, p := range s.Params {
		fmt.Fprintf(&b, ", %s(%s, %s, %d)", p.Kind, p.Type, p.Name, p.Index)
	}
	b.WriteString(")")
	return b.String()
}

// Signatures returns the kernels a kernel file declares, in file order; an
// unknown file gives an error wrapping ErrUnknownFile, a declaration that
// breaks a rule above one wrapping ErrSignature.
func Signatures(file string) ([]Signature, error) {
	src, err := Source(file)
	if err != nil {
		return nil, err
	}
	return ParseSignatures(file, src)
}

// ParseSignatures is Signatures of the dialect source src; name is the file
// name its errors give. Comments and preprocessor lines are skipped; every
// other KERNEL must be followed by its parenthesized declaration and a body.
// Parameter names are identifiers, distinct, and not dgq_* (the Metal
// prelude's own parameters); kernel names are identifiers and distinct in a
// file; a kernel has 1 to MaxParams parameters.
func ParseSignatures(name, src string) ([]Signature, error) {
	code := BlankNonCode(src, true)
	var sigs []Signature
	seen := map[string]bool{}
	for i := 0; i < len(code); {
		c := code[i]
		if !isIdentStart(c) {
			i++
			continue
		}
		j := i
		for j < len(code) && isIdentPart(code[j]) {
			j++
		}
		word := code[i:j]
		if word != "KERNEL" {
			i = j
			continue
		}
		line := 1 + strings.Count(code[:i], "\n")
		s, end, err := parseKernel(code, j)
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrSignature, name, line, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: %s:%d: kernel %s declared twice", ErrSignature, name, line, s.Name)
		}
		seen[s.Name] = true
		s.Line = line
		sigs = append(sigs, s)
		i = end
	}
	return sigs, nil
}

// parseKernel parses the declaration after a KERNEL token ending at code[at]:
// "(name, params...)" then the body's "{". It returns the signature and the
// offset after the closing parenthesis.
func parseKernel(code string, at int) (Signature, int, error) {
	open := skipSpace(code, at)
	if open >= len(code) || code[open] != '(' {
		return Signature{}, 0, fmt.Errorf("KERNEL not followed by (")
	}
	depth, end := 0, -1
	var args []string
	start := open + 1
	for k := open; k < len(code) && end < 0; k++ {
		switch code[k] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				args = append(args, code[start:k])
				end = k + 1
			}
		case ',':
			if depth == 1 {
				args = append(args, code[start:k])
				start = k + 1
			}
		}
	}
	if end < 0 {
		return Signature{}, 0, fmt.Errorf("KERNEL( without its closing parenthesis")
	}
	if b := skipSpace(code, end); b >= len(code) || code[b] != '{' {
		return Signature{}, 0, fmt.Errorf("KERNEL(...) not followed by its body")
	}
	s := Signature{Name: strings.TrimSpace(args[0])}
	if !isIdent(s.Name) {
		return Signature{}, 0, fmt.Errorf("kernel name %q is not an identifier", s.Name)
	}
	params := args[1:]
	if len(params) == 0 || len(params) > MaxParams {
		return Signature{}, 0, fmt.Errorf("kernel %s has %d parameters, want 1 to %d", s.Name, len(params), MaxParams)
	}
	names := map[string]bool{}
	for pos, a := range params {
		p, err := parseParam(strings.TrimSpace(a))
		if err != nil {
			return Signature{}, 0, fmt.Errorf("kernel %s, parameter %d: %v", s.Name, pos, err)
		}
		if p.Index != pos {
			return Signature{}, 0, fmt.Errorf("kernel %s, parameter %s: index %d at position %d", s.Name, p.Name, p.Index, pos)
		}
		if names[p.Name] {
			return Signature{}, 0, fmt.Errorf("kernel %s: parameter %s twice", s.Name, p.Name)
		}
		names[p.Name] = true
		s.Params = append(s.Params, p)
	}
	return s, end, nil
}

// parseParam parses one parameter, "BUF(T, name, i)" and the like.
func parseParam(a string) (Param, error) {
	k := 0
	for k < len(a) && isIdentPart(a[k]) {
		k++
	}
	kind, ok := paramKinds[a[:k]]
	if !ok {
		return Param{}, fmt.Errorf("%q is not BUF, CBUF or SCALAR(T, name, index)", a)
	}
	rest := strings.TrimSpace(a[k:])
	if len(rest) < 2 || rest[0] != '(' || rest[len(rest)-1] != ')' {
		return Param{}, fmt.Errorf("%q: want %s(T, name, index)", a, kind)
	}
	f := strings.Split(rest[1:len(rest)-1], ",")
	if len(f) != 3 {
		return Param{}, fmt.Errorf("%q: want %s(T, name, index)", a, kind)
	}
	p := Param{Kind: kind, Type: strings.TrimSpace(f[0]), Name: strings.TrimSpace(f[1])}
	if _, ok := typeSizes[p.Type]; !ok {
		return Param{}, fmt.Errorf("%q: type %q is not a dialect type", a, p.Type)
	}
	if !isIdent(p.Name) || strings.HasPrefix(p.Name, "dgq_") {
		return Param{}, fmt.Errorf("%q: name %q is not an identifier outside dgq_*", a, p.Name)
	}
	idx := strings.TrimSpace(f[2])
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || strconv.Itoa(n) != idx {
		return Param{}, fmt.Errorf("%q: index %q is not a decimal integer", a, idx)
	}
	p.Index = n
	return p, nil
}

// BlankNonCode returns src with comments and the contents of string and
// character literals replaced by spaces, and with directives also every
// preprocessor directive (continuation lines included); newlines are kept,
// so offsets and line numbers are src's and only code is left to scan.
func BlankNonCode(src string, directives bool) string {
	b := []byte(src)
	lineStart := true
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\n':
			lineStart = true
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case directives && lineStart && c == '#':
			// A directive runs to an end of line not escaped by a backslash.
			for i < len(b) && b[i] != '\n' {
				if b[i] == '\\' && i+1 < len(b) && b[i+1] == '\n' {
					b[i] = ' '
					i += 2
					continue
				}
				b[i] = ' '
				i++
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				b[i] = ' '
				i++
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			b[i], b[i+1] = ' ', ' '
			i += 2
			for i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/') {
				if b[i] != '\n' {
					b[i] = ' '
				}
				i++
			}
			if i < len(b) {
				b[i], b[i+1] = ' ', ' '
				i += 2
			}
		case c == '"' || c == '\'':
			lineStart = false
			i++
			for i < len(b) && b[i] != c && b[i] != '\n' {
				if b[i] == '\\' && i+1 < len(b) && b[i+1] != '\n' {
					b[i] = ' '
					i++
				}
				b[i] = ' '
				i++
			}
			if i < len(b) && b[i] == c {
				i++
			}
		default:
			lineStart = false
			i++
		}
	}
	return string(b)
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v') {
		i++
	}
	return i
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// isIdent reports whether s is a C identifier.
func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentPart(s[i]) {
			return false
		}
	}
	return true
}
