package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// FileName is the name of the tokenizer file inside a snapshot or pack
// directory.
const FileName = "tokenizer.json"

// LoadFile reads a tokenizer.json, or the tokenizer.json inside a directory
// (a Hugging Face snapshot or a dgq pack), and loads it with Load.
func LoadFile(path string) (*Tokenizer, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w: %s does not exist", ErrMissing, path)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if fi.IsDir() {
		dir := path
		path = filepath.Join(path, FileName)
		if fi, err = os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %w: %s holds no %s", ErrMissing, dir, FileName)
		} else if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("tokenizer: %s is not a regular file", path)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("tokenizer: %w: %s is %d bytes, limit %d", ErrTooLarge, path, fi.Size(), MaxFileSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	// Read at most one byte past the limit, in case the file grew.
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading %s: %w", path, err)
	}
	t, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// fileJSON is the top level of tokenizer.json. The model is read while the
// file is scanned; the other components stay raw, each parsed by the code
// that implements it, which refuses unknown types.
type fileJSON struct {
	Version       json.RawMessage
	Truncation    json.RawMessage
	Padding       json.RawMessage
	AddedTokens   json.RawMessage
	Normalizer    json.RawMessage
	PreTokenizer  json.RawMessage
	PostProcessor json.RawMessage
	Decoder       json.RawMessage
	model         *bpeModel
}

// readTopLevel splits tokenizer.json into its members (checking the syntax
// of the whole document). Unknown members are skipped, as by the library.
func readTopLevel(b []byte) (*fileJSON, error) {
	if !utf8.Valid(b) {
		return nil, formatErr("not valid UTF-8")
	}
	f := &fileJSON{}
	fields := map[string]*json.RawMessage{
		"version":        &f.Version,
		"truncation":     &f.Truncation,
		"padding":        &f.Padding,
		"added_tokens":   &f.AddedTokens,
		"normalizer":     &f.Normalizer,
		"pre_tokenizer":  &f.PreTokenizer,
		"post_processor": &f.PostProcessor,
		"decoder":        &f.Decoder,
	}
	r := &jsonReader{b: b}
	if r.peek() != '{' {
		return nil, formatErr("not a JSON object")
	}
	err := r.object(func(key string) error {
		if key == "model" {
			m, err := parseModel(r)
			f.model = m
			return err
		}
		v, err := r.value()
		if err != nil {
			return err
		}
		if dst, ok := fields[key]; ok {
			*dst = v
		}
		return nil
	})
	if err == nil {
		err = r.end()
	}
	if err != nil {
		return nil, wrapFormat("", err)
	}
	return f, nil
}

// wrapFormat returns err as it is when it already is one of this package's
// errors, else as an ErrFormat with context.
func wrapFormat(context string, err error) error {
	if errors.Is(err, ErrFormat) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooLarge) {
		return err
	}
	if context != "" {
		return formatErr("%s: %v", context, err)
	}
	return formatErr("%v", err)
}

type addedJSON struct {
	ID         *int64  `json:"id"`
	Content    *string `json:"content"`
	SingleWord *bool   `json:"single_word"`
	LStrip     *bool   `json:"lstrip"`
	RStrip     *bool   `json:"rstrip"`
	Normalized *bool   `json:"normalized"`
	Special    *bool   `json:"special"`
}

// Load parses a tokenizer.json. It refuses inputs over MaxFileSize,
// malformed JSON, ids that are negative, duplicated, inconsistent or absurdly
// sparse (ErrFormat), and component types or settings it does not implement
// (ErrUnsupported).
func Load(tokenizerJSON []byte) (*Tokenizer, error) {
	if len(tokenizerJSON) > MaxFileSize {
		return nil, fmt.Errorf("tokenizer: %w: %d bytes, limit %d", ErrTooLarge, len(tokenizerJSON), MaxFileSize)
	}
	f, err := readTopLevel(tokenizerJSON)
	if err != nil {
		return nil, err
	}
	if !isNull(f.Version) {
		var v string
		if err := json.Unmarshal(f.Version, &v); err != nil {
			return nil, formatErr("version: %v", err)
		}
		if v != "1.0" {
			return nil, unsupportedErr("tokenizer.json version %q (only \"1.0\")", v)
		}
	}
	var added []addedJSON
	if !isNull(f.AddedTokens) {
		if err := json.Unmarshal(f.AddedTokens, &added); err != nil {
			return nil, formatErr("added_tokens: %v", err)
		}
	}
	if !isNull(f.Truncation) {
		return nil, unsupportedErr("truncation (only null)")
	}
	if !isNull(f.Padding) {
		return nil, unsupportedErr("padding (only null)")
	}
	if f.model == nil {
		return nil, formatErr("no model")
	}

	t := &Tokenizer{}
	t.model = f.model
	if t.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.preTokenizer, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if t.decoder, err = parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err = t.buildAdded(added); err != nil {
		return nil, err
	}
	if t.post, err = parsePostProcessor(f.PostProcessor, t.vocabSize); err != nil {
		return nil, err
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// buildAdded registers the added tokens the way the library's deserializer
// does (one at a time, special ones also in the special set), checks that
// each gets the id the file records, and builds the id → token tables and
// the two matchers.
func (t *Tokenizer) buildAdded(list []addedJSON) error {
	m := t.model
	byContent := make(map[string]int, len(list))
	var tokens []*addedToken
	maxAdded := -1
	for i, a := range list {
		if a.ID == nil || a.Content == nil {
			return formatErr("added_tokens[%d]: missing id or content", i)
		}
		tok := &addedToken{
			content:    *a.Content,
			singleWord: deref(a.SingleWord, false),
			lstrip:     deref(a.LStrip, false),
			rstrip:     deref(a.RStrip, false),
			normalized: deref(a.Normalized, true),
			special:    deref(a.Special, false),
		}
		if tok.content == "" {
			// The library skips empty added tokens.
			continue
		}
		if _, dup := byContent[tok.content]; dup {
			return formatErr("added_tokens[%d]: %q listed twice", i, tok.content)
		}
		// The library's id: the model's id for a known string, else the next
		// free id above the model vocabulary.
		id, ok := m.vocab[tok.content]
		if !ok {
			n := len(m.vocab)
			switch {
			case maxAdded < 0:
				id = n
			case maxAdded >= n || n == 0:
				id = maxAdded + 1
			default:
				id = n
			}
		}
		if *a.ID != int64(id) {
			return formatErr("added token %q has id %d in the file but id %d by the vocabulary", tok.content, *a.ID, id)
		}
		tok.id = id
		byContent[tok.content] = id
		if id > maxAdded {
			maxAdded = id
		}
		tokens = append(tokens, tok)
	}

	size := m.maxID + 1
	if maxAdded+1 > size {
		size = maxAdded + 1
	}
	if limit := 2*(len(m.vocab)+len(tokens)) + 256; size > limit {
		return formatErr("ids up to %d for %d tokens: too sparse", size-1, len(m.vocab)+len(tokens))
	}
	t.vocabSize = size
	t.idToken = make([]string, size)
	t.idKnown = make([]bool, size)
	t.special = make([]bool, size)
	for id, s := range m.tokens {
		if m.known[id] {
			t.idToken[id] = s
			t.idKnown[id] = true
		}
	}
	specialSet := map[string]bool{}
	for _, tok := range tokens {
		t.idToken[tok.id] = tok.content
		t.idKnown[tok.id] = true
		if tok.special {
			specialSet[tok.content] = true
		}
	}
	// Decoding skips a token when its string is a special token's content.
	for id := range t.idToken {
		if t.idKnown[id] && specialSet[t.idToken[id]] {
			t.special[id] = true
		}
	}
	t.addedByContent = byContent

	// The matchers list the special tokens first, then the others, each in
	// file order, split by whether they match the normalized text.
	ordered := make([]*addedToken, 0, len(tokens))
	for _, tok := range tokens {
		if tok.special {
			ordered = append(ordered, tok)
		}
	}
	for _, tok := range tokens {
		if !tok.special {
			ordered = append(ordered, tok)
		}
	}
	var raw, norm []*addedToken
	var normPatterns []string
	for _, tok := range ordered {
		if tok.normalized {
			norm = append(norm, tok)
			p := tok.content
			if t.normalizer != nil {
				p = t.normalizer.normalize(p)
			}
			normPatterns = append(normPatterns, p)
		} else {
			raw = append(raw, tok)
		}
	}
	rawPatterns := make([]string, len(raw))
	for i, tok := range raw {
		rawPatterns[i] = tok.content
	}
	t.rawMatcher = newMatcher(rawPatterns, raw)
	t.normMatcher = newMatcher(normPatterns, norm)
	return nil
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// object is a JSON object whose values are parsed on demand.
type object map[string]json.RawMessage

// parseObject decodes a component. null (or absence) gives a nil object.
func parseObject(raw json.RawMessage, what string) (object, error) {
	if isNull(raw) {
		return nil, nil
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, formatErr("%s: %v", what, err)
	}
	if o == nil {
		return nil, formatErr("%s: not an object", what)
	}
	return o, nil
}

// parseComponent decodes a typed component (normalizer, pre_tokenizer,
// decoder, post_processor) and returns it with its "type"; null (or
// absence) gives a nil object.
func parseComponent(raw json.RawMessage, what string) (object, string, error) {
	o, err := parseObject(raw, what)
	if err != nil || o == nil {
		return nil, "", err
	}
	typ, err := o.typ(what)
	if err != nil {
		return nil, "", err
	}
	return o, typ, nil
}

// typ returns the "type" field.
func (o object) typ(what string) (string, error) {
	raw, ok := o["type"]
	if !ok {
		return "", formatErr("%s: no type", what)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", formatErr("%s: type: %v", what, err)
	}
	return s, nil
}

// only refuses fields outside allowed ("type" is always allowed): a field
// this package does not know could change the behaviour.
func (o object) only(what string, allowed ...string) error {
	var extra []string
	for k := range o {
		if k == "type" {
			continue
		}
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return unsupportedErr("%s: field %s", what, strings.Join(extra, ", "))
	}
	return nil
}

// get decodes field key into v; a missing field is an error unless optional.
func (o object) get(what, key string, v any, optional bool) error {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		if optional {
			return nil
		}
		return formatErr("%s: missing %s", what, key)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return formatErr("%s: %s: %v", what, key, err)
	}
	return nil
}

// parsePattern reads a {"String": s} pattern; regex patterns are not
// implemented.
func parsePattern(raw json.RawMessage, what string) (string, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		return "", formatErr("%s: pattern: not an object", what)
	}
	if _, ok := p["Regex"]; ok {
		return "", unsupportedErr("%s: Regex pattern (only String)", what)
	}
	s, ok := p["String"]
	if !ok || len(p) != 1 {
		return "", formatErr("%s: pattern must be {\"String\": ...}", what)
	}
	var str string
	if err := json.Unmarshal(s, &str); err != nil {
		return "", formatErr("%s: pattern: %v", what, err)
	}
	return str, nil
}

// parseSequence reads a "Sequence" component: the list under key, each item
// parsed by parse (null items refused). w names the component in errors.
func parseSequence[T any](o object, w, key string, parse func(json.RawMessage) (T, error)) ([]T, error) {
	if err := o.only(w, key); err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := o.get(w, key, &list, false); err != nil {
		return nil, err
	}
	seq := make([]T, 0, len(list))
	for i, item := range list {
		if isNull(item) {
			return nil, formatErr("%s: item %d is null", w, i)
		}
		v, err := parse(item)
		if err != nil {
			return nil, err
		}
		seq = append(seq, v)
	}
	return seq, nil
}
