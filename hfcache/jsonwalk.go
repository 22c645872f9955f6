package hfcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// walker reads a JSON document token by token. Unlike json.Unmarshal it
// sees every object key, so duplicate keys can be detected, and it never
// builds more than the caller asks for.
type walker struct {
	dec *json.Decoder
	doc []byte
}

func newWalker(doc []byte) *walker {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	return &walker{dec: dec, doc: doc}
}

// next returns the next token; a syntax error is described with its offset.
func (w *walker) next() (json.Token, error) {
	tok, err := w.dec.Token()
	if err == nil {
		return tok, nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return nil, fmt.Errorf("not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("not valid JSON: unexpected end of input")
	}
	return nil, fmt.Errorf("not valid JSON: %v", err)
}

// delim reads the next token and requires it to be d; what names the value
// for the error message.
func (w *walker) delim(d json.Delim, what string) error {
	tok, err := w.next()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		kind := "an object"
		if d == '[' {
			kind = "an array"
		}
		return fmt.Errorf("%s is %s, not %s", what, describe(tok), kind)
	}
	return nil
}

// key reads an object key. It returns ok=false when the object ends instead.
func (w *walker) key() (string, bool, error) {
	if !w.dec.More() {
		// Consume the closing '}' (the decoder guarantees it is one).
		if _, err := w.next(); err != nil {
			return "", false, err
		}
		return "", false, nil
	}
	tok, err := w.next()
	if err != nil {
		return "", false, err
	}
	k, ok := tok.(string)
	if !ok {
		return "", false, fmt.Errorf("not valid JSON: object key is %s", describe(tok))
	}
	return k, true, nil
}

// skip consumes one value of any shape, iteratively (no recursion, so deep
// nesting cannot exhaust the stack).
func (w *walker) skip() error {
	depth := 0
	for {
		tok, err := w.next()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// end requires that nothing but whitespace follows the top-level value.
func (w *walker) end() error {
	off := w.dec.InputOffset()
	for off < int64(len(w.doc)) && strings.IndexByte(" \t\r\n", w.doc[off]) >= 0 {
		off++
	}
	if off < int64(len(w.doc)) {
		return fmt.Errorf("unexpected data after the top-level object (at byte %d)", off)
	}
	return nil
}

// describe names a token for an error message.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return "the string " + quote(v)
	case json.Number:
		return "the number " + clip(string(v))
	case bool:
		return "the boolean " + strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// parseCount parses a JSON number that must be a non-negative integer
// fitting int64 (a dimension, an offset, a size).
func parseCount(n json.Number) (int64, error) {
	s := string(n)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%s is negative", clip(s))
	}
	if strings.ContainsAny(s, ".eE") {
		return 0, fmt.Errorf("%s is not an integer", clip(s))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s does not fit int64", clip(s))
	}
	return v, nil
}

// quote returns s quoted (Go syntax, so control characters cannot break the
// line), shortened when very long.
func quote(s string) string {
	const max = 200
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}

// clip shortens a token for display.
func clip(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// bare returns s unquoted when it is a plain identifier such as a dtype name
// (upper-case letters, digits, '_'), quoted otherwise.
func bare(s string) string {
	if s == "" || len(s) > 32 {
		return quote(s)
	}
	for _, r := range s {
		if !(r == '_' || (r >= '0' && r <= '9') || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z')) {
			return quote(s)
		}
	}
	return s
}

// display returns a path for an error message, quoted only when it contains
// characters that could break the line.
func display(p string) string {
	for _, r := range p {
		if !unicode.IsPrint(r) {
			return strconv.Quote(p)
		}
	}
	return p
}
