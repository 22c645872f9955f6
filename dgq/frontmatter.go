package dgq

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// frontMatter is what dgq reads of a Markdown file's YAML front matter (a
// Hugging Face model card's metadata block): its top-level keys whose values
// are single-line scalars, and the names of the other top-level keys.
type frontMatter struct {
	// values holds each top-level key with a single-line scalar value
	// (plain, single- or double-quoted), unquoted.
	values map[string]string
	// other holds the top-level keys with any other value (a list, a
	// mapping, a block scalar, a multi-line or undecodable scalar, null) and
	// the keys given more than once, whose value is ambiguous.
	other map[string]bool
}

// parseFrontMatter reads the front matter of a Markdown document: a first
// line "---" (after an optional byte order mark) up to the next line "---"
// or "...". It reads a subset of YAML, enough for a model card's top-level
// scalars, and never fails: what it cannot read lands in other. ok is false
// when the document has no closed front matter.
func parseFrontMatter(doc []byte) (fm frontMatter, ok bool) {
	doc = bytes.TrimPrefix(doc, []byte("\uFEFF"))
	lines := strings.Split(string(doc), "\n")
	if len(lines) < 2 || frontMatterDelim(lines[0]) != "---" {
		return frontMatter{}, false
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if d := frontMatterDelim(lines[i]); d == "---" || d == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		return frontMatter{}, false
	}
	fm = frontMatter{values: map[string]string{}, other: map[string]bool{}}
	for _, line := range lines[1:end] {
		line = strings.TrimSuffix(line, "\r")
		key, rest, found := strings.Cut(line, ":")
		if !found || !frontMatterKey(key) || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue // indented (part of a block), a list item, a comment, or not a simple key
		}
		if _, dup := fm.values[key]; dup || fm.other[key] {
			delete(fm.values, key)
			fm.other[key] = true
			continue
		}
		if v, ok := yamlScalarValue(strings.Trim(rest, " \t")); ok {
			fm.values[key] = v
		} else {
			fm.other[key] = true
		}
	}
	return fm, true
}

// frontMatterDelim is a line without its line ending and trailing blanks.
func frontMatterDelim(line string) string {
	return strings.TrimRight(line, " \t\r")
}

// frontMatterKey reports whether s is a key dgq reads: a plain word of
// letters, digits and "_.-" at the start of the line.
func frontMatterKey(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return s[0] != '-' && s[0] != '.'
}

// yamlScalarValue decodes the value part of a "key: value" line when it is
// a complete single-line scalar: double-quoted (JSON escapes only),
// single-quoted, or plain (up to a " #" comment). An empty value (a block
// follows), null, and anything else are not.
func yamlScalarValue(s string) (string, bool) {
	if s == "" || !utf8.ValidString(s) {
		return "", false
	}
	switch s[0] {
	case '"':
		end := closingDoubleQuote(s)
		if end < 0 || !yamlRestIsComment(s[end+1:]) {
			return "", false
		}
		var v string
		if err := json.Unmarshal([]byte(s[:end+1]), &v); err != nil {
			return "", false // a YAML escape JSON lacks (\x, \e, \N, …): not read
		}
		return v, true
	case '\'':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '\'' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			if !yamlRestIsComment(s[i+1:]) {
				return "", false
			}
			return b.String(), true
		}
		return "", false // not closed on this line
	case '[', '{', '&', '*', '!', '|', '>', '%', '@', '`', '#':
		return "", false // a flow collection, an anchor, alias, tag, block scalar, or reserved
	}
	if i := yamlCommentStart(s); i >= 0 {
		s = strings.TrimRight(s[:i], " \t")
	}
	switch s {
	case "~", "null", "Null", "NULL":
		return "", false
	}
	return s, true
}

// closingDoubleQuote is the index of the quote that closes the
// double-quoted scalar at the start of s, or -1.
func closingDoubleQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// yamlRestIsComment reports whether what follows a quoted scalar is
// nothing, blanks, or blanks and a comment.
func yamlRestIsComment(rest string) bool {
	t := strings.TrimLeft(rest, " \t")
	return t == "" || (t[0] == '#' && len(t) < len(rest))
}

// yamlCommentStart is the index of the " #" or "\t#" that starts a comment
// in a plain scalar, or -1.
func yamlCommentStart(s string) int {
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return i - 1
		}
	}
	return -1
}

// yamlScalar renders s as a YAML scalar: plain when it is a word that every
// YAML reader takes for that string (a letter first, then letters, digits
// and "._/+-", and no boolean or null word), otherwise double-quoted with
// JSON's escapes (valid YAML), on one line. Invalid UTF-8 becomes U+FFFD.
func yamlScalar(s string) string {
	if yamlPlainSafe(s) {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := strings.TrimSuffix(b.String(), "\n")
	// YAML 1.1 readers break lines at NEL; JSON leaves it raw.
	return strings.ReplaceAll(out, "\u0085", `\u0085`)
}

// yamlPlainSafe reports whether s can be written as a plain scalar.
func yamlPlainSafe(s string) bool {
	if s == "" || len(s) > 200 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || c == '/' || c == '+' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "true", "false", "on", "off", "null":
		return false
	}
	return true
}
