package tokenizer

// Tokenizer is a loaded tokenizer.json. It is immutable and safe for
// concurrent use.
type Tokenizer struct {
	model        *bpeModel
	normalizer   normalizer   // nil: none
	preTokenizer preTokenizer // nil: none
	decoder      decoder      // nil: tokens joined with spaces
	post         *templateProcessing

	rawMatcher  *matcher // added tokens matched against the raw text
	normMatcher *matcher // added tokens matched against normalized text

	addedByContent map[string]int

	vocabSize int
	idToken   []string // id → token string, added tokens first
	idKnown   []bool
	special   []bool // id → skipped by Decode(skipSpecial)
}

// Encode returns the ids of text. With addSpecial the post-processor's
// special tokens (Gemma: <bos> in front) are added.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	ids, _ := t.encode(text, false)
	if addSpecial && t.post != nil {
		ids = t.post.apply(ids)
	}
	return ids
}

// EncodeTokens returns the token strings of text, without special tokens
// from the post-processor: the vocabulary strings of model tokens, and the
// matched text of added tokens.
func (t *Tokenizer) EncodeTokens(text string) []string {
	_, toks := t.encode(text, true)
	if toks == nil {
		toks = []string{}
	}
	return toks
}

// encode runs the pipeline of the library's encode: added tokens, then
// normalizer, then added tokens on normalized text, then pre-tokenizer, then
// model.
func (t *Tokenizer) encode(text string, wantTokens bool) ([]int, []string) {
	ids := []int{}
	var toks []string
	pieces := splitAdded(text, t.rawMatcher, nil)
	var words []string
	for _, p := range pieces {
		if p.token != nil {
			ids = append(ids, p.token.id)
			if wantTokens {
				toks = append(toks, p.text)
			}
			continue
		}
		norm := p.text
		if t.normalizer != nil {
			norm = t.normalizer.normalize(norm)
		}
		for _, q := range splitAdded(norm, t.normMatcher, nil) {
			if q.token != nil {
				ids = append(ids, q.token.id)
				if wantTokens {
					toks = append(toks, q.text)
				}
				continue
			}
			words = words[:0]
			if t.preTokenizer != nil {
				words = t.preTokenizer.split(q.text, words)
			} else {
				words = append(words, q.text)
			}
			for _, w := range words {
				n := len(ids)
				ids = t.model.tokenize(w, ids)
				if wantTokens {
					for _, id := range ids[n:] {
						toks = append(toks, t.model.tokens[id])
					}
				}
			}
		}
	}
	return ids, toks
}

// VocabSize is the size of the id space: one more than the highest id of
// the model vocabulary and the added tokens (for Gemma 3, 262145: the
// 262144 model ids and <image_soft_token>).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token string: an added token's id, else the
// model vocabulary's.
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	if id, ok := t.addedByContent[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// Token returns the string of an id (added tokens first), and false for an
// id outside the vocabulary.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.idToken) || !t.idKnown[id] {
		return "", false
	}
	return t.idToken[id], true
}

// IsSpecial reports whether id is a special token, one that
// Decode(ids, true) leaves out.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}
