package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// tinyWith returns the tiny tokenizer.json with one top-level member (or,
// for "model.x", one model member) replaced by value (deleted when nil).
func tinyWith(t *testing.T, key string, value any) []byte {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(tinyJSON(t), &top); err != nil {
		t.Fatal(err)
	}
	obj := top
	if k, ok := strings.CutPrefix(key, "model."); ok {
		obj, key = top["model"].(map[string]any), k
	}
	if value == nil {
		delete(obj, key)
	} else {
		obj[key] = value
	}
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(pairs ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i].(string)] = pairs[i+1]
	}
	return m
}

func TestLoadUnsupported(t *testing.T) {
	str := obj("String", " ")
	cases := []struct {
		name, key string
		value     any
		mention   string
	}{
		{"normalizer NFKC", "normalizer", obj("type", "NFKC"), `"NFKC"`},
		{"normalizer in sequence", "normalizer", obj("type", "Sequence", "normalizers", []any{obj("type", "Lowercase")}), `"Lowercase"`},
		{"regex replace", "normalizer", obj("type", "Replace", "pattern", obj("Regex", " +"), "content", "x"), "Regex"},
		{"pre_tokenizer ByteLevel", "pre_tokenizer", obj("type", "ByteLevel"), `"ByteLevel"`},
		{"pre_tokenizer Metaspace", "pre_tokenizer", obj("type", "Metaspace", "replacement", "▁"), `"Metaspace"`},
		{"split behavior", "pre_tokenizer", obj("type", "Split", "pattern", str, "behavior", "Weird", "invert", false), "Weird"},
		{"split extra field", "pre_tokenizer", obj("type", "Split", "pattern", str, "behavior", "Isolated", "invert", false, "limit", 3), "limit"},
		{"decoder WordPiece", "decoder", obj("type", "WordPiece"), `"WordPiece"`},
		{"decoder in sequence", "decoder", obj("type", "Sequence", "decoders", []any{obj("type", "Fuse"), obj("type", "CTC")}), `"CTC"`},
		{"post_processor RobertaProcessing", "post_processor", obj("type", "RobertaProcessing"), `"RobertaProcessing"`},
		{"model Unigram", "model", obj("type", "Unigram", "vocab", []any{[]any{"a", 0.0}}), `"Unigram"`},
		{"model WordPiece", "model", obj("type", "WordPiece", "vocab", obj("a", 0)), `"WordPiece"`},
		{"model without type", "model.type", nil, "model"},
		{"dropout", "model.dropout", 0.1, "dropout"},
		{"subword prefix", "model.continuing_subword_prefix", "##", "continuing_subword_prefix"},
		{"suffix", "model.end_of_word_suffix", "</w>", "end_of_word_suffix"},
		{"unknown model field", "model.cache_capacity", 10, "cache_capacity"},
		{"truncation", "truncation", obj("max_length", 8), "truncation"},
		{"padding", "padding", obj("strategy", "BatchLongest"), "padding"},
		{"version", "version", "2.0", "version"},
	}
	for _, c := range cases {
		_, err := Load(tinyWith(t, c.key, c.value))
		if !errors.Is(err, ErrUnsupported) || !strings.HasPrefix(err.Error(), "tokenizer: ") || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

func TestLoadMalformed(t *testing.T) {
	good := string(tinyJSON(t))
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not json", []byte("hello")},
		{"array", []byte("[]")},
		{"truncated", []byte(good[:len(good)/2])},
		{"trailing data", []byte(good + "x")},
		{"invalid utf-8", []byte(strings.Replace(good, `"<pad>"`, "\"<p\xffd>\"", 1))},
		{"no model", tinyWith(t, "model", nil)},
		{"no vocab", tinyWith(t, "model.vocab", nil)},
		{"no merges", tinyWith(t, "model.merges", nil)},
		{"negative id", tinyWith(t, "model.vocab", obj("a", -1))},
		{"fractional id", tinyWith(t, "model.vocab", obj("a", 1.5))},
		{"huge id", tinyWith(t, "model.vocab", obj("a", 1<<40))},
		{"sparse ids", tinyWith(t, "model.vocab", obj("a", 0, "b", 100000))},
		{"duplicate ids", tinyWith(t, "model.vocab", obj("a", 0, "b", 0))},
		{"merge of unknown token", tinyWith(t, "model.merges", []any{[]any{"a", "<nope>"}})},
		{"merge result unknown", tinyWith(t, "model.merges", []any{[]any{"q", "q"}})},
		{"merge of three", tinyWith(t, "model.merges", []any{[]any{"a", "b", "c"}})},
		{"mixed merge forms", tinyWith(t, "model.merges", []any{[]any{"i", "n"}, "e r"})},
		{"legacy merge without space", tinyWith(t, "model.merges", []any{"in"})},
		{"unk not in vocab", tinyWith(t, "model.unk_token", "<nope>")},
		{"added id mismatch", tinyWith(t, "added_tokens", []any{obj("id", 7, "content", "<pad>", "special", true)})},
		{"added id beyond", tinyWith(t, "added_tokens", []any{obj("id", 600, "content", "<new>", "special", true)})},
		{"added without id", tinyWith(t, "added_tokens", []any{obj("content", "<pad>")})},
		{"added twice", tinyWith(t, "added_tokens", []any{obj("id", 0, "content", "<pad>"), obj("id", 0, "content", "<pad>")})},
		{"post_processor unknown special", tinyWith(t, "post_processor", obj("type", "TemplateProcessing",
			"single", []any{obj("SpecialToken", obj("id", "<x>", "type_id", 0)), obj("Sequence", obj("id", "A", "type_id", 0))},
			"special_tokens", obj()))},
		{"post_processor id out of range", tinyWith(t, "post_processor", obj("type", "TemplateProcessing",
			"single", []any{obj("SpecialToken", obj("id", "<bos>", "type_id", 0)), obj("Sequence", obj("id", "A", "type_id", 0))},
			"special_tokens", obj("<bos>", obj("id", "<bos>", "ids", []any{99999}, "tokens", []any{"<bos>"}))))},
		{"post_processor B in single", tinyWith(t, "post_processor", obj("type", "TemplateProcessing",
			"single", []any{obj("Sequence", obj("id", "B", "type_id", 0))}, "special_tokens", obj()))},
		{"normalizer without type", tinyWith(t, "normalizer", obj("pattern", obj("String", " ")))},
		{"normalizer not an object", tinyWith(t, "normalizer", "Replace")},
		{"replace without content", tinyWith(t, "normalizer", obj("type", "Replace", "pattern", obj("String", " ")))},
		{"strip with a long content", tinyWith(t, "decoder", obj("type", "Strip", "content", "ab", "start", 1, "stop", 0))},
	}
	for _, c := range cases {
		_, err := Load(c.data)
		if !errors.Is(err, ErrFormat) || !strings.HasPrefix(err.Error(), "tokenizer: ") {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

// A hostile nesting depth is refused rather than exhausting the stack.
func TestLoadDeepNesting(t *testing.T) {
	deep := `{"x": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	if _, err := Load([]byte(deep)); !errors.Is(err, ErrFormat) {
		t.Errorf("err = %v", err)
	}
}

func TestLoadLegacyMergesWithSpaces(t *testing.T) {
	tok, err := Load(tinyWith(t, "model.merges", []any{"i n", "e r"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.EncodeTokens("in er"); !slices.Equal(got, []string{"in", "▁", "er"}) {
		t.Errorf("tokens %q", got)
	}
	// A token holding a space: the cut is the one the vocabulary explains.
	data := tinyWith(t, "model.vocab", obj("a", 0, "b c", 1, "ab c", 2, "<unk>", 3))
	var top map[string]any
	_ = json.Unmarshal(data, &top)
	top["added_tokens"] = []any{}
	top["post_processor"] = nil
	top["model"].(map[string]any)["merges"] = []any{"a b c"}
	data, _ = json.Marshal(top)
	if tok, err = Load(data); err != nil {
		t.Fatal(err)
	}
	if v, ok := tok.model.merges[pairKey(0, 1)]; !ok || v != 2 {
		t.Errorf("merge (a, b c) = %x, %v; want rank 0, id 2", v, ok)
	}
}

// Strip's results where the library's Strip (0.23) does not panic; where it
// panics (stop reaching before start) this package returns the empty rest.
func TestStripDecoder(t *testing.T) {
	for _, c := range []struct {
		content     rune
		start, stop int
		in, want    string
	}{
		{'e', 2, 3, "xeee", "x"}, {'e', 2, 3, "eeex", "ex"}, {'e', 2, 3, "eé", "é"}, {'e', 2, 3, "ée", "é"},
		{'e', 2, 3, "日本", "日本"}, {'e', 0, 1, "e", ""}, {'e', 0, 1, "ee", "e"}, {'e', 0, 1, "xeee", "xee"},
		{'e', 0, 1, "eeex", "eeex"}, {' ', 1, 0, "", ""}, {' ', 1, 0, "  a ", " a "},
		{'e', 2, 3, "eeee", ""}, {'e', 2, 3, "", ""},
	} {
		d := stripDecoder{content: c.content, start: c.start, stop: c.stop}
		if got := d.decodeChain([]string{c.in})[0]; got != c.want {
			t.Errorf("Strip(%q, %d, %d)(%q) = %q, want %q", c.content, c.start, c.stop, c.in, got, c.want)
		}
	}
}

func TestParseByteToken(t *testing.T) {
	for s, want := range map[string]int{"<0x41>": 0x41, "<0xff>": 0xff, "<0xFf>": 0xff, "<0x+7>": 7, "<0x00>": 0,
		"<0x4>": -1, "<0x041>": -1, "<0xZZ>": -1, "<0x-1>": -1, "<0x++>": -1, "(0x41>": -1, "<0x41)": -1} {
		b, ok := parseByteToken(s)
		if got := int(b); !ok {
			got = -1
			if want != -1 {
				t.Errorf("parseByteToken(%q) failed", s)
			}
		} else if got != want {
			t.Errorf("parseByteToken(%q) = %d, want %d", s, got, want)
		}
	}
}
