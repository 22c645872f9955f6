package tokenizer

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a small strict JSON reader over UTF-8 input, used for the
// large parts of tokenizer.json (the top level and the model's vocab and
// merges), where encoding/json's reflection and repeated validation passes
// would dominate the load time. It accepts exactly RFC 8259 JSON, except
// that lone UTF-16 surrogates in \u escapes are refused (as serde_json, the
// reader of the tokenizers library, refuses them).
type jsonReader struct {
	b []byte
	i int
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 512

var errJSONDepth = errors.New("nesting too deep")

func (r *jsonReader) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", r.i, fmt.Sprintf(format, args...))
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		c := r.b[r.i]
		if c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return
		}
		r.i++
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (r *jsonReader) peek() byte {
	r.ws()
	if r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

func (r *jsonReader) expect(c byte) error {
	if r.peek() != c {
		if r.i >= len(r.b) {
			return r.errorf("unexpected end, want %q", c)
		}
		return r.errorf("found %q, want %q", r.b[r.i], c)
	}
	r.i++
	return nil
}

// str reads a string.
func (r *jsonReader) str() (string, error) {
	var buf []byte
	b, err := r.strBytes(&buf)
	return string(b), err
}

// strBytes reads a string and returns its bytes: a slice of the input when
// it has no escapes, else the decoded text, which is also left in *buf
// (reusing its storage). The input must be valid UTF-8 (Load checks it once
// for the whole file).
func (r *jsonReader) strBytes(buf *[]byte) ([]byte, error) {
	if err := r.expect('"'); err != nil {
		return nil, err
	}
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return r.b[start : r.i-1], nil
		case c == '\\':
			b, err := r.strSlow(append((*buf)[:0], r.b[start:r.i]...))
			*buf = b
			return b, err
		case c < 0x20:
			return nil, r.errorf("control character in string")
		}
		r.i++
	}
	return nil, r.errorf("unterminated string")
}

// strSlow finishes a string that has escapes, appending to buf; r.i is at
// the first '\\'.
func (r *jsonReader) strSlow(buf []byte) ([]byte, error) {
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return buf, nil
		case c < 0x20:
			return nil, r.errorf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			r.i++
			continue
		}
		r.i++
		if r.i >= len(r.b) {
			break
		}
		e := r.b[r.i]
		r.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			u, err := r.hex4()
			if err != nil {
				return nil, err
			}
			rn := rune(u)
			if utf16.IsSurrogate(rn) {
				if rn >= 0xdc00 || r.i+1 >= len(r.b) || r.b[r.i] != '\\' || r.b[r.i+1] != 'u' {
					return nil, r.errorf("lone surrogate in \\u escape")
				}
				r.i += 2
				lo, err := r.hex4()
				if err != nil {
					return nil, err
				}
				rn = utf16.DecodeRune(rn, rune(lo))
				if rn == utf8.RuneError {
					return nil, r.errorf("lone surrogate in \\u escape")
				}
			}
			buf = utf8.AppendRune(buf, rn)
		default:
			return nil, r.errorf("bad escape \\%c", e)
		}
	}
	return nil, r.errorf("unterminated string")
}

func (r *jsonReader) hex4() (uint16, error) {
	if r.i+4 > len(r.b) {
		return 0, r.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(r.b[r.i:r.i+4]), 16, 16)
	if err != nil {
		return 0, r.errorf("bad \\u escape")
	}
	r.i += 4
	return uint16(v), nil
}

// uint reads a non-negative integer (no sign, fraction or exponent) below
// limit.
func (r *jsonReader) uint(limit int) (int, error) {
	r.ws()
	start := r.i
	v := 0
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		v = v*10 + int(r.b[r.i]-'0')
		r.i++
		if v >= limit {
			return 0, r.errorf("integer out of range")
		}
	}
	n := r.i - start
	if n == 0 || (n > 1 && r.b[start] == '0') {
		return 0, r.errorf("not a non-negative integer")
	}
	if r.i < len(r.b) {
		switch r.b[r.i] {
		case '.', 'e', 'E':
			return 0, r.errorf("not an integer")
		}
	}
	return v, nil
}

// value skips one value, checking its syntax, and returns its bytes.
func (r *jsonReader) value() ([]byte, error) {
	r.ws()
	start := r.i
	if err := r.skip(0); err != nil {
		return nil, err
	}
	return r.b[start:r.i], nil
}

func (r *jsonReader) skip(depth int) error {
	if depth > maxJSONDepth {
		return errJSONDepth
	}
	switch c := r.peek(); {
	case c == '"':
		_, err := r.str()
		return err
	case c == '{':
		return r.object(func(string) error { return r.skip(depth + 1) })
	case c == '[':
		return r.array(func(int) error { return r.skip(depth + 1) })
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	case c == 0:
		return r.errorf("unexpected end")
	default:
		return r.errorf("unexpected %q", c)
	}
}

func (r *jsonReader) literal(word string) error {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		return r.errorf("bad literal")
	}
	r.i += len(word)
	return nil
}

func (r *jsonReader) digits() int {
	n := 0
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
		n++
	}
	return n
}

func (r *jsonReader) number() error {
	if r.b[r.i] == '-' {
		r.i++
	}
	if r.i < len(r.b) && r.b[r.i] == '0' {
		r.i++
	} else if r.digits() == 0 {
		return r.errorf("bad number")
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if r.digits() == 0 {
			return r.errorf("bad number")
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			return r.errorf("bad number")
		}
	}
	return nil
}

// object reads an object, calling member for each key with r positioned at
// the value, which member must consume.
func (r *jsonReader) object(member func(key string) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	if r.peek() == '}' {
		r.i++
		return nil
	}
	for {
		key, err := r.str()
		if err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		default:
			return r.errorf("want ',' or '}'")
		}
	}
}

// array reads an array, calling elem for each element.
func (r *jsonReader) array(elem func(i int) error) error {
	if err := r.expect('['); err != nil {
		return err
	}
	if r.peek() == ']' {
		r.i++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return nil
		default:
			return r.errorf("want ',' or ']'")
		}
	}
}

// end checks that only whitespace remains.
func (r *jsonReader) end() error {
	if r.peek() != 0 {
		return r.errorf("data after the top-level value")
	}
	return nil
}
