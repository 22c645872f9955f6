package msl

import (
	"regexp"
	"strconv"
	"strings"
)

// Checks of the LLVM IR clang emits for a unit (-O0, line tables): what the
// front end accepts but Metal does not, and only the whole unit shows.

var (
	irDefine   = regexp.MustCompile(`^define [^@]*@("[^"]+"|[\w.$]+)\(.*?(?:!dbg !(\d+))?[^!]*\{$`)
	irCall     = regexp.MustCompile(`\b(?:call|invoke)\b[^@%(]*@("[^"]+"|[\w.$]+)\(`)
	irIndirect = regexp.MustCompile(`\b(?:call|invoke)\b[^@%(]*%[\w.$-]+\(`)
	irGlobal   = regexp.MustCompile(`^@("[^"]+"|[\w.$]+) = (.*)$`)
	irSubprog  = regexp.MustCompile(`^!(\d+) = distinct !DISubprogram\(name: "([^"]*)".*?file: !(\d+), line: (\d+)`)
	irFile     = regexp.MustCompile(`^!(\d+) = !DIFile\(filename: "([^"]*)"`)
	irAS       = regexp.MustCompile(`\baddrspace\((\d+)\)`)
)

// irFunc is a function the unit defines.
type irFunc struct {
	dbg   string   // its DISubprogram's id
	calls []string // the functions it calls directly, in order
}

// checkIR returns the first finding in ir, the IR of unit (whose lines lm
// maps): a mutable variable at program scope outside the threadgroup address
// space (placed at the unit's first mention of its name), a call through a
// function pointer, or recursion (placed at the functions' definitions).
func checkIR(ir, unit string, lm lineMap) (Diagnostic, bool) {
	funcs := map[string]*irFunc{}
	var order []string
	sub := map[string][3]string{} // id → name, file id, line
	files := map[string]string{}
	var cur *irFunc
	var curName, indirect, global string
	for _, l := range strings.Split(ir, "\n") {
		if cur != nil {
			if l == "}" {
				cur = nil
				continue
			}
			if indirect == "" && irIndirect.MatchString(l) {
				indirect = curName
			}
			for _, m := range irCall.FindAllStringSubmatch(l, -1) {
				cur.calls = append(cur.calls, m[1])
			}
			continue
		}
		if m := irDefine.FindStringSubmatch(l); m != nil {
			cur, curName = &irFunc{dbg: m[2]}, m[1]
			funcs[curName] = cur
			order = append(order, curName)
			continue
		}
		if m := irGlobal.FindStringSubmatch(l); m != nil {
			rest := m[2]
			as := "0"
			if a := irAS.FindStringSubmatch(rest); a != nil {
				as = a[1]
			}
			if global == "" && !strings.HasPrefix(m[1], "llvm.") && strings.Contains(" "+rest, " global ") && as != "3" {
				global = m[1]
			}
			continue
		}
		if m := irSubprog.FindStringSubmatch(l); m != nil {
			sub[m[1]] = [3]string{m[2], m[3], m[4]}
			continue
		}
		if m := irFile.FindStringSubmatch(l); m != nil {
			files[m[1]] = m[2]
		}
	}
	pos := func(fn string) Position {
		f := funcs[fn]
		if f == nil {
			return Position{File: "unit"}
		}
		s, ok := sub[f.dbg]
		if !ok {
			return Position{File: "unit"}
		}
		line, _ := strconv.Atoi(s[2])
		return Position{File: files[s[1]], Line: line}
	}
	if global != "" {
		name := demangle(global)
		if i := strings.LastIndex(name, "::"); i >= 0 {
			name = name[i+2:]
		}
		return Diagnostic{Pos: firstMention(unit, lm, name), Severity: "error",
			Message: "variable " + demangle(global) + " at program scope (or static) must be constant or threadgroup in Metal"}, false
	}
	if indirect != "" {
		return Diagnostic{Pos: pos(indirect), Severity: "error",
			Message: "Metal has no function pointers: " + demangle(indirect) + " calls through one"}, false
	}
	if cycle := findCycle(funcs, order); cycle != nil {
		names := make([]string, len(cycle))
		for i, fn := range cycle {
			names[i] = demangle(fn)
		}
		return Diagnostic{Pos: pos(cycle[0]), Severity: "error",
			Message: "Metal has no recursion: " + strings.Join(names, " → ")}, false
	}
	return Diagnostic{}, true
}

// findCycle returns a cycle of direct calls among the defined functions
// (first function repeated at the end), or nil.
func findCycle(funcs map[string]*irFunc, order []string) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(fn string) bool
	visit = func(fn string) bool {
		state[fn] = open
		stack = append(stack, fn)
		for _, c := range funcs[fn].calls {
			if funcs[c] == nil {
				continue
			}
			switch state[c] {
			case open:
				for i, s := range stack {
					if s == c {
						cycle = append(append([]string{}, stack[i:]...), c)
						return true
					}
				}
			case unseen:
				if visit(c) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[fn] = done
		return false
	}
	for _, fn := range order {
		if state[fn] == unseen && visit(fn) {
			return cycle
		}
	}
	return nil
}

// demangle returns the source name of an Itanium-mangled function or
// variable of the forms clang gives a unit's names: _Z[L]<n><name>…,
// _Z[L]N…<n><name>E… (the last component) and _ZZ<n><fn>…E<n><var> (a
// function's static as fn::var). Anything else is returned as it is.
func demangle(s string) string {
	s = strings.Trim(s, `"`)
	switch {
	case strings.HasPrefix(s, "_ZZ"):
		fn, rest := lengthName(strings.TrimPrefix(s[3:], "L"))
		if i := strings.Index(rest, "E"); fn != "" && i >= 0 {
			if v, _ := lengthName(rest[i+1:]); v != "" {
				return fn + "::" + v
			}
		}
	case strings.HasPrefix(s, "_Z"):
		r := strings.TrimPrefix(s[2:], "L")
		if strings.HasPrefix(r, "N") {
			r = r[1:]
			var last string
			for {
				n, rest := lengthName(r)
				if n == "" {
					break
				}
				last, r = n, rest
			}
			if last != "" {
				return last
			}
			break
		}
		if n, _ := lengthName(r); n != "" {
			return n
		}
	}
	return s
}

// lengthName reads <decimal length><name> from the start of s.
func lengthName(s string) (string, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n <= 0 || i+n > len(s) {
		return "", s
	}
	return s[i : i+n], s[i+n:]
}

// firstMention returns the position of the first line of unit outside
// comments that holds name as a word (the unit's start if none does).
func firstMention(unit string, lm lineMap, name string) Position {
	for i, l := range strings.Split(blankComments(unit), "\n") {
		for _, w := range words(l) {
			if w == name {
				return lm.at(i + 1)
			}
		}
	}
	return lm.at(1)
}
