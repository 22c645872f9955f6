package hub

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Glob is a compiled --include/--exclude pattern with the semantics of
// huggingface_hub's allow_patterns/ignore_patterns: Python's
// fnmatch.fnmatchcase on the whole '/'-separated repo path, case-sensitive.
//
//   - '*' matches any run of characters, '/' included ("*.json" matches
//     "a/b.json"); '?' matches one character, '/' included;
//   - "[seq]" matches one character of seq and "[!seq]" one that is not;
//     in seq, "a-z" is a range, a ']' right after "[" or "[!" is a member,
//     a '-' first or last is a member, a range whose ends are reversed
//     matches nothing; a '[' without a closing ']' is a literal '[';
//   - every other character, '\' included, matches itself (there is no
//     escape character);
//   - as huggingface_hub does, '\' in the pattern is first replaced by '/',
//     and a pattern ending in '/' gets a '*' appended (a folder and
//     everything in it).
type Glob struct {
	src  string
	toks []globTok
}

type globKind uint8

const (
	globLit globKind = iota
	globAny
	globStar
	globClass
)

type globTok struct {
	kind   globKind
	r      rune        // globLit
	neg    bool        // globClass
	ranges []runeRange // globClass; single members are lo == hi
}

type runeRange struct{ lo, hi rune }

// CompileGlob compiles a pattern; every string is a valid pattern.
func CompileGlob(pattern string) Glob {
	p := strings.ReplaceAll(pattern, `\`, "/")
	if strings.HasSuffix(p, "/") {
		p += "*"
	}
	g := Glob{src: pattern}
	rs := []rune(p)
	for i := 0; i < len(rs); {
		c := rs[i]
		i++
		switch c {
		case '*':
			for i < len(rs) && rs[i] == '*' {
				i++
			}
			g.toks = append(g.toks, globTok{kind: globStar})
		case '?':
			g.toks = append(g.toks, globTok{kind: globAny})
		case '[':
			j := i
			if j < len(rs) && rs[j] == '!' {
				j++
			}
			if j < len(rs) && rs[j] == ']' {
				j++
			}
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j >= len(rs) {
				g.toks = append(g.toks, globTok{kind: globLit, r: '['})
				continue
			}
			g.toks = append(g.toks, parseClass(rs[i:j]))
			i = j + 1
		default:
			g.toks = append(g.toks, globTok{kind: globLit, r: c})
		}
	}
	return g
}

// classElem is one character of the regex class Python's
// fnmatch.translate writes: sep marks the unescaped '-' it joins range
// chunks with; every other element is a literal.
type classElem struct {
	r   rune
	sep bool
}

// parseClass turns the inside of "[...]" into a class exactly as Python's
// fnmatch.translate and then its regex engine would: the same chunking of
// the ranges, the same removal of reversed ranges, the same reading of the
// resulting class.
func parseClass(stuff []rune) globTok {
	t := globTok{kind: globClass}
	var elems []classElem
	if !slices.Contains(stuff, '-') {
		for _, r := range stuff {
			elems = append(elems, classElem{r: r})
		}
	} else {
		var chunks [][]rune
		i, k := 0, 1
		if stuff[0] == '!' {
			k = 2
		}
		for {
			h := -1
			for x := k; x < len(stuff); x++ {
				if stuff[x] == '-' {
					h = x
					break
				}
			}
			if h < 0 {
				break
			}
			chunks = append(chunks, stuff[i:h])
			i, k = h+1, h+3
		}
		if last := stuff[i:]; len(last) > 0 || len(chunks) == 0 {
			chunks = append(chunks, last)
		} else {
			chunks[len(chunks)-1] = append(slices.Clone(chunks[len(chunks)-1]), '-')
		}
		for k := len(chunks) - 1; k > 0; k-- {
			a, b := chunks[k-1], chunks[k]
			if len(a) > 0 && len(b) > 0 && a[len(a)-1] > b[0] {
				chunks[k-1] = append(slices.Clone(a[:len(a)-1]), b[1:]...)
				chunks = slices.Delete(chunks, k, k+1)
			}
		}
		for k, c := range chunks {
			if k > 0 {
				elems = append(elems, classElem{r: '-', sep: true})
			}
			for _, r := range c {
				elems = append(elems, classElem{r: r})
			}
		}
	}
	switch {
	case len(elems) == 0:
		return t // matches nothing
	case len(elems) == 1 && elems[0] == classElem{r: '!'}:
		t.neg = true // "[!]" after range removal: any character
		return t
	case elems[0] == classElem{r: '!'}:
		t.neg, elems = true, elems[1:]
	}
	for i := 0; i < len(elems); {
		this := elems[i]
		if i+1 < len(elems) && elems[i+1].sep {
			if i+2 < len(elems) {
				t.ranges = append(t.ranges, runeRange{this.r, elems[i+2].r}) // reversed: matches nothing
				i += 3
				continue
			}
			t.ranges = append(t.ranges, runeRange{this.r, this.r}, runeRange{'-', '-'})
			break
		}
		t.ranges = append(t.ranges, runeRange{this.r, this.r})
		i++
	}
	return t
}

// String returns the pattern as given.
func (g Glob) String() string { return g.src }

// Match reports whether the whole of name matches the pattern.
func (g Glob) Match(name string) bool {
	rs := []rune(name)
	ti, ni := 0, 0
	starT, starN := -1, 0
	for ni < len(rs) {
		if ti < len(g.toks) {
			t := g.toks[ti]
			switch {
			case t.kind == globStar:
				starT, starN = ti, ni
				ti++
				continue
			case t.matchOne(rs[ni]):
				ti++
				ni++
				continue
			}
		}
		if starT < 0 {
			return false
		}
		starN++
		ti, ni = starT+1, starN
	}
	for ti < len(g.toks) && g.toks[ti].kind == globStar {
		ti++
	}
	return ti == len(g.toks)
}

// matchOne reports whether a non-star token matches the rune r.
func (t globTok) matchOne(r rune) bool {
	switch t.kind {
	case globLit:
		return t.r == r
	case globAny:
		return true
	case globClass:
		in := false
		for _, rr := range t.ranges {
			if r >= rr.lo && r <= rr.hi {
				in = true
				break
			}
		}
		return in != t.neg
	}
	return false
}

// Filter holds --include and --exclude patterns.
type Filter struct {
	include, exclude []Glob
}

// NewFilter compiles the patterns. No include pattern means "everything".
func NewFilter(include, exclude []string) Filter {
	var f Filter
	for _, p := range include {
		f.include = append(f.include, CompileGlob(p))
	}
	for _, p := range exclude {
		f.exclude = append(f.exclude, CompileGlob(p))
	}
	return f
}

// Keep reports whether a repo path is selected, as huggingface_hub's
// filter_repo_objects: it must match an include pattern (when there are
// any) and no exclude pattern.
func (f Filter) Keep(path string) bool {
	if len(f.include) > 0 {
		ok := false
		for _, g := range f.include {
			if g.Match(path) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, g := range f.exclude {
		if g.Match(path) {
			return false
		}
	}
	return true
}

// validUTF8 reports whether s is valid UTF-8 (repo paths must be).
func validUTF8(s string) bool { return utf8.ValidString(s) }
