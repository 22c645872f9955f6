package tokenizer

import (
	"encoding/json"
	"strings"
)

// preTokenizer splits a piece of normalized text into words; it appends the
// non-empty words to out.
type preTokenizer interface {
	split(s string, out []string) []string
}

// splitBehavior says what becomes of the delimiters of a Split.
type splitBehavior int

const (
	splitRemoved splitBehavior = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

var splitBehaviors = map[string]splitBehavior{
	"Removed":            splitRemoved,
	"Isolated":           splitIsolated,
	"MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext":     splitMergedWithNext,
	"Contiguous":         splitContiguous,
}

// splitPreTokenizer is the Split pre-tokenizer with a string pattern.
type splitPreTokenizer struct {
	pattern  string
	behavior splitBehavior
	invert   bool
}

type span struct {
	start, end int
	match      bool
}

func (p splitPreTokenizer) split(s string, out []string) []string {
	if s == "" {
		return out
	}
	// The pattern's occurrences and the text between them, in order.
	var spans []span
	if p.pattern == "" {
		spans = []span{{0, len(s), false}}
	} else {
		prev := 0
		for i := 0; i <= len(s); {
			k := strings.Index(s[i:], p.pattern)
			if k < 0 {
				break
			}
			start := i + k
			end := start + len(p.pattern)
			if start > prev {
				spans = append(spans, span{prev, start, false})
			}
			spans = append(spans, span{start, end, true})
			prev, i = end, end
		}
		if prev < len(s) {
			spans = append(spans, span{prev, len(s), false})
		}
	}
	if p.invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}

	var parts []span
	switch p.behavior {
	case splitRemoved:
		for _, sp := range spans {
			if !sp.match {
				parts = append(parts, sp)
			}
		}
	case splitIsolated:
		parts = spans
	case splitMergedWithPrevious:
		prevMatch := false
		for _, sp := range spans {
			if sp.match && !prevMatch && len(parts) > 0 {
				parts[len(parts)-1].end = sp.end
			} else {
				parts = append(parts, sp)
			}
			prevMatch = sp.match
		}
	case splitMergedWithNext:
		// Walk backwards, merging each match into the part after it.
		prevMatch := false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && len(parts) > 0 {
				parts[len(parts)-1].start = sp.start
			} else {
				parts = append(parts, sp)
			}
			prevMatch = sp.match
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
	case splitContiguous:
		prevMatch := false
		for _, sp := range spans {
			if sp.match == prevMatch && len(parts) > 0 {
				parts[len(parts)-1].end = sp.end
			} else {
				parts = append(parts, sp)
			}
			prevMatch = sp.match
		}
	}
	for _, sp := range parts {
		if sp.end > sp.start {
			out = append(out, s[sp.start:sp.end])
		}
	}
	return out
}

type sequencePreTokenizer []preTokenizer

func (q sequencePreTokenizer) split(s string, out []string) []string {
	words := []string{s}
	for _, p := range q {
		var next []string
		for _, w := range words {
			next = p.split(w, next)
		}
		words = next
	}
	return append(out, words...)
}

// parsePreTokenizer reads the "pre_tokenizer" component; null gives nil.
func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	const what = "pre_tokenizer"
	o, typ, err := parseComponent(raw, what)
	if err != nil || o == nil {
		return nil, err
	}
	switch typ {
	case "Split":
		const w = "pre_tokenizer Split"
		if err := o.only(w, "pattern", "behavior", "invert"); err != nil {
			return nil, err
		}
		var p splitPreTokenizer
		if p.pattern, err = parsePattern(o["pattern"], w); err != nil {
			return nil, err
		}
		var behavior string
		if err := o.get(w, "behavior", &behavior, false); err != nil {
			return nil, err
		}
		b, ok := splitBehaviors[behavior]
		if !ok {
			return nil, unsupportedErr("%s: behavior %q", w, behavior)
		}
		p.behavior = b
		if err := o.get(w, "invert", &p.invert, true); err != nil {
			return nil, err
		}
		return p, nil
	case "Sequence":
		seq, err := parseSequence(o, "pre_tokenizer Sequence", "pretokenizers", parsePreTokenizer)
		return sequencePreTokenizer(seq), err
	default:
		return nil, unsupportedErr("pre_tokenizer type %q", typ)
	}
}
