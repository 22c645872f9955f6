package tokenizer

import (
	"encoding/json"
	"slices"
)

// templateProcessing is the TemplateProcessing post-processor, applied to a
// single sequence: the ids of the "single" template with $A replaced by the
// encoding.
type templateProcessing struct {
	before, after []int
}

func (p *templateProcessing) apply(ids []int) []int {
	out := make([]int, 0, len(p.before)+len(ids)+len(p.after))
	out = append(out, p.before...)
	out = append(out, ids...)
	return append(out, p.after...)
}

type specialTokenJSON struct {
	ID     string   `json:"id"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens"`
}

type templatePieceJSON struct {
	SpecialToken *struct {
		ID     string `json:"id"`
		TypeID int    `json:"type_id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID     string `json:"id"`
		TypeID int    `json:"type_id"`
	} `json:"Sequence"`
}

// parsePostProcessor reads the "post_processor" component; null gives nil
// (the library then adds nothing to a single sequence).
func parsePostProcessor(raw json.RawMessage, vocabSize int) (*templateProcessing, error) {
	const what = "post_processor"
	o, typ, err := parseComponent(raw, what)
	if err != nil || o == nil {
		return nil, err
	}
	if typ != "TemplateProcessing" {
		return nil, unsupportedErr("post_processor type %q", typ)
	}
	const w = "post_processor TemplateProcessing"
	if err := o.only(w, "single", "pair", "special_tokens"); err != nil {
		return nil, err
	}
	var specials map[string]specialTokenJSON
	if err := o.get(w, "special_tokens", &specials, true); err != nil {
		return nil, err
	}
	for name, st := range specials {
		if st.ID != name {
			return nil, formatErr("%s: special token %q has id %q", w, name, st.ID)
		}
		if len(st.IDs) != len(st.Tokens) {
			return nil, formatErr("%s: special token %q has %d ids and %d tokens", w, name, len(st.IDs), len(st.Tokens))
		}
		for _, id := range st.IDs {
			if id < 0 || id >= vocabSize {
				return nil, formatErr("%s: special token %q has id %d outside the vocabulary", w, name, id)
			}
		}
	}
	read := func(key string, allowed ...string) ([]templatePieceJSON, error) {
		var pieces []templatePieceJSON
		if err := o.get(w, key, &pieces, false); err != nil {
			return nil, err
		}
		for i, p := range pieces {
			switch {
			case p.SpecialToken != nil && p.Sequence == nil:
				if _, ok := specials[p.SpecialToken.ID]; !ok {
					return nil, formatErr("%s: %s[%d]: unknown special token %q", w, key, i, p.SpecialToken.ID)
				}
			case p.Sequence != nil && p.SpecialToken == nil:
				if !slices.Contains(allowed, p.Sequence.ID) {
					return nil, formatErr("%s: %s[%d]: sequence %q", w, key, i, p.Sequence.ID)
				}
			default:
				return nil, formatErr("%s: %s[%d]: not a SpecialToken or Sequence piece", w, key, i)
			}
		}
		return pieces, nil
	}
	single, err := read("single", "A")
	if err != nil {
		return nil, err
	}
	if _, ok := o["pair"]; ok {
		if _, err := read("pair", "A", "B"); err != nil {
			return nil, err
		}
	}
	p := &templateProcessing{}
	seen := 0
	for _, piece := range single {
		if piece.Sequence != nil {
			seen++
			continue
		}
		ids := specials[piece.SpecialToken.ID].IDs
		if seen == 0 {
			p.before = append(p.before, ids...)
		} else {
			p.after = append(p.after, ids...)
		}
	}
	if seen != 1 {
		return nil, formatErr("%s: single template has %d sequences, want 1", w, seen)
	}
	return p, nil
}
