package tokenizer

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Decode turns ids back into text: each id becomes its token string (ids
// outside the vocabulary are dropped, and with skipSpecial so are special
// tokens), then the decoder chain runs over the strings, as the library's
// decode does.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || id >= len(t.idToken) || !t.idKnown[id] {
			continue
		}
		if skipSpecial && t.special[id] {
			continue
		}
		toks = append(toks, t.idToken[id])
	}
	if t.decoder == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.decoder.decodeChain(toks), "")
}

// decoder is a tokenizer.json decoder: it maps token strings to strings;
// Decode concatenates the result.
type decoder interface {
	decodeChain(toks []string) []string
}

// replaceDecoder replaces a string in every token.
type replaceDecoder struct{ pattern, content string }

func (r replaceDecoder) decodeChain(toks []string) []string {
	if r.pattern == "" {
		return toks
	}
	for i, s := range toks {
		toks[i] = strings.ReplaceAll(s, r.pattern, r.content)
	}
	return toks
}

// byteFallbackDecoder turns runs of "<0xXX>" tokens into the text their
// bytes spell; a run that is not valid UTF-8 becomes one U+FFFD per byte.
type byteFallbackDecoder struct{}

// parseByteToken reports the byte of a "<0xXX>" token, parsing XX as Rust's
// u8::from_str_radix(_, 16) does (either case, an optional leading '+').
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	digits := s[3:5]
	if digits[0] == '+' {
		digits = digits[1:]
	}
	var v byte
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

func (byteFallbackDecoder) decodeChain(toks []string) []string {
	out := toks[:0:0]
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, s := range toks {
		if b, ok := parseByteToken(s); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, s)
	}
	flush()
	return out
}

// fuseDecoder joins all tokens into one.
type fuseDecoder struct{}

func (fuseDecoder) decodeChain(toks []string) []string {
	return []string{strings.Join(toks, "")}
}

// stripDecoder removes up to start leading and stop trailing occurrences of
// a character from every token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func (d stripDecoder) decodeChain(toks []string) []string {
	for i, s := range toks {
		chars := []rune(s)
		lo := 0
		for k := 0; k < d.start && k < len(chars); k++ {
			if chars[k] != d.content {
				break
			}
			lo = k + 1
		}
		hi := len(chars)
		for k := 0; k < d.stop && k < len(chars)-lo; k++ {
			idx := len(chars) - k - 1
			if chars[idx] != d.content {
				break
			}
			hi = idx
		}
		toks[i] = string(chars[lo:hi])
	}
	return toks
}

type sequenceDecoder []decoder

func (q sequenceDecoder) decodeChain(toks []string) []string {
	for _, d := range q {
		toks = d.decodeChain(toks)
	}
	return toks
}

// parseDecoder reads the "decoder" component; null gives nil.
func parseDecoder(raw json.RawMessage) (decoder, error) {
	const what = "decoder"
	o, typ, err := parseComponent(raw, what)
	if err != nil || o == nil {
		return nil, err
	}
	switch typ {
	case "Replace":
		const w = "decoder Replace"
		if err := o.only(w, "pattern", "content"); err != nil {
			return nil, err
		}
		var r replaceDecoder
		if r.pattern, err = parsePattern(o["pattern"], w); err != nil {
			return nil, err
		}
		if err := o.get(w, "content", &r.content, false); err != nil {
			return nil, err
		}
		return r, nil
	case "ByteFallback":
		if err := o.only("decoder ByteFallback"); err != nil {
			return nil, err
		}
		return byteFallbackDecoder{}, nil
	case "Fuse":
		if err := o.only("decoder Fuse"); err != nil {
			return nil, err
		}
		return fuseDecoder{}, nil
	case "Strip":
		const w = "decoder Strip"
		if err := o.only(w, "content", "start", "stop"); err != nil {
			return nil, err
		}
		var content string
		var d stripDecoder
		if err := o.get(w, "content", &content, false); err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(content) != 1 {
			return nil, formatErr("%s: content %q is not one character", w, content)
		}
		d.content, _ = utf8.DecodeRuneInString(content)
		if err := o.get(w, "start", &d.start, false); err != nil {
			return nil, err
		}
		if err := o.get(w, "stop", &d.stop, false); err != nil {
			return nil, err
		}
		if d.start < 0 || d.stop < 0 {
			return nil, formatErr("%s: negative start or stop", w)
		}
		return d, nil
	case "Sequence":
		seq, err := parseSequence(o, "decoder Sequence", "decoders", parseDecoder)
		return sequenceDecoder(seq), err
	default:
		return nil, unsupportedErr("decoder type %q", typ)
	}
}
