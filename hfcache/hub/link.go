package hub

import (
	"strings"
)

// maxLinkHeader bounds the Link header values parsed (all lines together).
const maxLinkHeader = 64 << 10

// ParseNextLink returns the target of the rel="next" link of an HTTP Link
// header (RFC 8288; values holds every Link header line, as
// http.Header.Values gives them), or "" when there is none. The Hub
// paginates listings this way: `Link: <URL>; rel="next"`. The target is
// returned as written (it may be relative). A value that does not follow
// the grammar (an unterminated <…> or quoted string, a parameter without a
// name, stray characters) is an error wrapping ErrProtocol.
func ParseNextLink(values []string) (string, error) {
	total := 0
	for _, v := range values {
		total += len(v)
	}
	if total > maxLinkHeader {
		return "", failf(ErrProtocol, "Link header of %d bytes exceeds %d", total, maxLinkHeader)
	}
	for _, v := range values {
		links, err := parseLinks(v)
		if err != nil {
			return "", err
		}
		for _, l := range links {
			if l.rel("next") {
				return l.target, nil
			}
		}
	}
	return "", nil
}

// link is one link-value of a Link header.
type link struct {
	target string
	params map[string]string // lower-cased names; the first of a repeated name wins
}

// rel reports whether the link's rel parameter lists relation r
// (relation types are compared case-insensitively).
func (l link) rel(r string) bool {
	for _, t := range strings.Fields(l.params["rel"]) {
		if strings.EqualFold(t, r) {
			return true
		}
	}
	return false
}

// parseLinks parses one Link header line: link-values separated by
// commas, each "<target>" followed by ";name[=value]" parameters.
func parseLinks(s string) ([]link, error) {
	var out []link
	i := 0
	skipOWS := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		if s[i] != '<' {
			return nil, failf(ErrProtocol, "Link header %s: want '<' at byte %d", shown(s), i)
		}
		end := strings.IndexByte(s[i+1:], '>')
		if end < 0 {
			return nil, failf(ErrProtocol, "Link header %s: unterminated <target>", shown(s))
		}
		l := link{target: s[i+1 : i+1+end], params: map[string]string{}}
		for j := 0; j < len(l.target); j++ {
			if c := l.target[j]; c <= ' ' || c == 0x7f || c == '<' {
				return nil, failf(ErrProtocol, "Link header %s: invalid character in <target>", shown(s))
			}
		}
		i += end + 2
		for {
			skipOWS()
			if i == len(s) || s[i] == ',' {
				break
			}
			if s[i] != ';' {
				return nil, failf(ErrProtocol, "Link header %s: want ';' or ',' at byte %d", shown(s), i)
			}
			i++
			skipOWS()
			start := i
			for i < len(s) && isTokenChar(s[i]) {
				i++
			}
			if i == start {
				return nil, failf(ErrProtocol, "Link header %s: parameter without a name at byte %d", shown(s), i)
			}
			name := strings.ToLower(s[start:i])
			value := ""
			skipOWS()
			if i < len(s) && s[i] == '=' {
				i++
				skipOWS()
				v, n, err := linkParamValue(s[i:])
				if err != nil {
					return nil, failf(ErrProtocol, "Link header %s: %v", shown(s), err)
				}
				value, i = v, i+n
			}
			if _, seen := l.params[name]; !seen {
				l.params[name] = value
			}
		}
		out = append(out, l)
	}
}

// linkParamValue reads a token or a quoted string at the start of s and
// returns its value and the bytes consumed.
func linkParamValue(s string) (string, int, error) {
	if s == "" {
		return "", 0, errorString("parameter value missing")
	}
	if s[0] != '"' {
		n := 0
		for n < len(s) && isTokenChar(s[n]) {
			n++
		}
		if n == 0 {
			return "", 0, errorString("parameter value missing")
		}
		return s[:n], n, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c < ' ' && c != '\t', c == 0x7f:
			return "", 0, errorString("control character in quoted string")
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errorString("unterminated quoted string")
}

// isTokenChar reports whether c is an RFC 9110 tchar.
func isTokenChar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// errorString is a plain error for details folded into a wrapped message.
type errorString string

func (e errorString) Error() string { return string(e) }
