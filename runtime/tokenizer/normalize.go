package tokenizer

import (
	"encoding/json"
	"strings"
)

// normalizer is a tokenizer.json normalizer.
type normalizer interface {
	normalize(s string) string
}

// replaceNormalizer replaces every occurrence of a string (left to right,
// without overlap). An empty pattern matches nothing, as in the library.
type replaceNormalizer struct{ pattern, content string }

func (r replaceNormalizer) normalize(s string) string {
	if r.pattern == "" {
		return s
	}
	return strings.ReplaceAll(s, r.pattern, r.content)
}

// prependNormalizer prepends a string to non-empty text.
type prependNormalizer struct{ prefix string }

func (p prependNormalizer) normalize(s string) string {
	if s == "" {
		return s
	}
	return p.prefix + s
}

type sequenceNormalizer []normalizer

func (q sequenceNormalizer) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// parseNormalizer reads the "normalizer" component; null gives nil.
func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	const what = "normalizer"
	o, typ, err := parseComponent(raw, what)
	if err != nil || o == nil {
		return nil, err
	}
	switch typ {
	case "Replace":
		if err := o.only("normalizer Replace", "pattern", "content"); err != nil {
			return nil, err
		}
		var r replaceNormalizer
		if r.pattern, err = parsePattern(o["pattern"], "normalizer Replace"); err != nil {
			return nil, err
		}
		if err := o.get("normalizer Replace", "content", &r.content, false); err != nil {
			return nil, err
		}
		return r, nil
	case "Prepend":
		if err := o.only("normalizer Prepend", "prepend"); err != nil {
			return nil, err
		}
		var p prependNormalizer
		if err := o.get("normalizer Prepend", "prepend", &p.prefix, false); err != nil {
			return nil, err
		}
		return p, nil
	case "Sequence":
		seq, err := parseSequence(o, "normalizer Sequence", "normalizers", parseNormalizer)
		return sequenceNormalizer(seq), err
	default:
		return nil, unsupportedErr("normalizer type %q", typ)
	}
}
