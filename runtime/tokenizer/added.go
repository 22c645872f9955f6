package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	content    string
	id         int
	special    bool
	singleWord bool // match only between non-word characters
	lstrip     bool // swallow the whitespace on the left
	rstrip     bool // swallow the whitespace on the right
	normalized bool // match against the normalized text
}

// matcher finds added tokens in text: leftmost match first, and the longest
// among those starting there (the library's Aho-Corasick in
// leftmost-longest mode), without overlaps.
type matcher struct {
	// children maps node<<8|byte to the child node; node 0 is the root.
	children map[uint64]int32
	// terminal[node] is the index+1 of the token ending at node (0: none).
	terminal []int32
	first    [256]bool
	tokens   []*addedToken
}

func newMatcher(patterns []string, tokens []*addedToken) *matcher {
	m := &matcher{children: map[uint64]int32{}, terminal: []int32{0}, tokens: tokens}
	for i, p := range patterns {
		if p == "" {
			continue
		}
		m.first[p[0]] = true
		node := int32(0)
		for k := 0; k < len(p); k++ {
			key := uint64(node)<<8 | uint64(p[k])
			child, ok := m.children[key]
			if !ok {
				child = int32(len(m.terminal))
				m.terminal = append(m.terminal, 0)
				m.children[key] = child
			}
			node = child
		}
		if m.terminal[node] == 0 { // the first of identical patterns wins
			m.terminal[node] = int32(i + 1)
		}
	}
	return m
}

// next returns the first match at or after from: its bounds and token, or
// tok == nil when there is none.
func (m *matcher) next(s string, from int) (start, end int, tok *addedToken) {
	if len(m.terminal) == 1 {
		return 0, 0, nil
	}
	for i := from; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		node, best, bestEnd := int32(0), int32(0), 0
		for k := i; k < len(s); k++ {
			child, ok := m.children[uint64(node)<<8|uint64(s[k])]
			if !ok {
				break
			}
			node = child
			if t := m.terminal[node]; t != 0 {
				best, bestEnd = t, k+1
			}
		}
		if best != 0 {
			return i, bestEnd, m.tokens[best-1]
		}
	}
	return 0, 0, nil
}

// piece is a part of the text during encoding: either an added token
// (token != nil, text is what it matched) or text still to tokenize.
type piece struct {
	text  string
	token *addedToken
}

// splitAdded cuts the added tokens of m out of s and appends the pieces to
// out, dropping empty ones. It follows the library's find_matches: a
// single_word token is skipped when a word character touches it, lstrip and
// rstrip extend the token's piece over adjacent whitespace, and the search
// resumes after the match itself (not after the swallowed whitespace).
func splitAdded(s string, m *matcher, out []piece) []piece {
	if s == "" {
		return out
	}
	startOffset := 0
	for pos := 0; ; {
		start, stop, tok := m.next(s, pos)
		if tok == nil {
			break
		}
		pos = stop
		if tok.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.lstrip {
			start = max(trailingSpaceStart(s[:start]), startOffset)
		}
		if tok.rstrip {
			stop += leadingSpaceLen(s[stop:])
		}
		if startOffset < start {
			out = append(out, piece{text: s[startOffset:start]})
		}
		if stop > start {
			out = append(out, piece{text: s[start:stop], token: tok})
		}
		startOffset = stop
	}
	if startOffset < len(s) {
		out = append(out, piece{text: s[startOffset:]})
	}
	return out
}

// isWordChar is the regex class \w with Unicode: alphabetic, marks, decimal
// digits, connector punctuation and join controls.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && !(r == utf8.RuneError && n == 1) && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && !(r == utf8.RuneError && n == 1) && isWordChar(r)
}

// isRegexSpace is the regex class \s with Unicode (White_Space).
func isRegexSpace(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// trailingSpaceStart returns where the whitespace at the end of s begins.
func trailingSpaceStart(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if (r == utf8.RuneError && n == 1) || !isRegexSpace(r) {
			break
		}
		i -= n
	}
	return i
}

// leadingSpaceLen returns the length of the whitespace at the start of s.
func leadingSpaceLen(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !isRegexSpace(r) {
			break
		}
		i += n
	}
	return i
}
