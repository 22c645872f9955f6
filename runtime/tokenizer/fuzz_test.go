package tokenizer

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkEncoding checks what holds for every text: no panic, every id names a
// token, the token strings agree with the ids, the post-processor adds
// exactly <bos>, and decoding gives valid UTF-8. For valid UTF-8 it also
// checks the round trip: decoding gives the text back, except that the
// decoder turns "▁" into a space and, in the tiny tokenizer whose byte
// tokens are special added tokens, text spelling a byte token ("<0x41>")
// comes back as that byte. (Invalid UTF-8 is byte-encoded; its bytes decode
// to U+FFFD, as do valid bytes in the same run of byte tokens.)
func checkEncoding(t *testing.T, name string, tok *Tokenizer, text string) {
	ids := tok.Encode(text, false)
	toks := tok.EncodeTokens(text)
	if len(toks) != len(ids) {
		t.Fatalf("%s: %q: %d tokens, %d ids", name, text, len(toks), len(ids))
	}
	for i, id := range ids {
		s, ok := tok.Token(id)
		if !ok || id >= tok.VocabSize() {
			t.Fatalf("%s: %q: id %d out of the vocabulary", name, text, id)
		}
		if s != toks[i] {
			t.Fatalf("%s: %q: token %d is %q but id %d is %q", name, text, i, toks[i], id, s)
		}
	}
	withBOS := tok.Encode(text, true)
	if len(withBOS) != len(ids)+1 || withBOS[0] != 2 || !slices.Equal(withBOS[1:], ids) {
		t.Fatalf("%s: %q: Encode(_, true) = %v, Encode(_, false) = %v", name, text, withBOS, ids)
	}
	decoded := tok.Decode(ids, false)
	if !utf8.ValidString(decoded) || !utf8.ValidString(tok.Decode(withBOS, true)) {
		t.Fatalf("%s: %q: decoded to invalid UTF-8", name, text)
	}
	if !utf8.ValidString(text) || (name == "tiny" && strings.Contains(text, "<0x")) {
		return
	}
	if want := strings.ReplaceAll(text, "▁", " "); decoded != want {
		t.Fatalf("%s: Decode(Encode(%q)) = %q, want %q", name, text, decoded, want)
	}
}

func FuzzEncode(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	f.Add("a\xffb\xc3")
	f.Add("<0x41><0xC3><0xA9>")
	f.Add("▁▁ ▁")
	f.Add("\xf0\x9d\x94\x98\xff")
	gemma := gemma3Tokenizer(f)
	tiny := tinyTokenizer(f)
	f.Fuzz(func(t *testing.T, text string) {
		checkEncoding(t, "gemma3", gemma, text)
		checkEncoding(t, "tiny", tiny, text)
	})
}

// FuzzDecode decodes arbitrary ids, in and out of range.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 238, 0, 3, 0xa9, 0xff})
	f.Add([]byte("\x00\x00\x01\x0a\x00\x00\x01\x0b"))
	gemma := gemma3Tokenizer(f)
	tiny := tinyTokenizer(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var ids []int
		for len(data) >= 4 {
			v := int(int32(binary.BigEndian.Uint32(data)))
			ids = append(ids, v%300000)
			data = data[4:]
		}
		for _, tok := range []*Tokenizer{gemma, tiny} {
			for _, skip := range []bool{false, true} {
				if s := tok.Decode(ids, skip); !utf8.ValidString(s) {
					t.Fatalf("Decode(%v, %v) is not valid UTF-8: %q", ids, skip, s)
				}
			}
		}
	})
}

// miniTokenizerJSON is a small complete tokenizer.json using every
// component this package implements, a compact seed for FuzzLoad (a large
// seed such as the tiny tokenizer makes the fuzzer spend its time
// minimizing).
const miniTokenizerJSON = `{"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [
  {"id": 0, "content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 1, "content": "<bos>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 2, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 3, "content": "<0x41>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 12, "content": "<m>", "single_word": true, "lstrip": true, "rstrip": true, "normalized": false, "special": false},
  {"id": 13, "content": "a b", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
  {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "MergedWithNext", "invert": false}]},
 "post_processor": {"type": "TemplateProcessing",
  "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
  "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
   {"Sequence": {"id": "B", "type_id": 1}}],
  "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1], "tokens": ["<bos>"]}}},
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
  {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
 "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
  "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
  "vocab": {"<pad>": 0, "<bos>": 1, "<unk>": 2, "<0x41>": 3, "<0xC3>": 4, "<0xA9>": 5, "a": 6, "b": 7,
   "\u2581": 8, "ab": 9, "\u2581a": 10, "\u2581ab": 11},
  "merges": [["a", "b"], ["\u2581", "a"], ["\u2581", "ab"]]}}`

// FuzzLoad feeds arbitrary bytes to Load: it must return an error or a
// tokenizer that encodes and decodes without panicking.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(miniTokenizerJSON))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3}, "merges": ["a b"], "unk_token": "<unk>"},
		"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "_"}]},
		"pre_tokenizer": {"type": "Split", "pattern": {"String": "b"}, "behavior": "Contiguous", "invert": true},
		"decoder": {"type": "Strip", "content": "a", "start": 1, "stop": 2},
		"added_tokens": [{"id": 4, "content": "<x>", "lstrip": true, "rstrip": true, "single_word": true, "normalized": true, "special": true}]}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"\u00e9": 0}, "merges": []}, "added_tokens": [{"id": 1, "content": " "}]}`))
	f.Add([]byte(`[1, 2, {"a": "\ud83d\ude00"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Load(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		for _, s := range []string{"", "ab abab <x> a\tb", "é\xff<x>", "   ", "x <m> a b<m>A<0x41>"} {
			ids := tok.Encode(s, true)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("id %d out of range %d", id, tok.VocabSize())
				}
			}
			tok.EncodeTokens(s)
			tok.Decode(ids, false)
			tok.Decode(ids, true)
		}
	})
}

func TestMiniTokenizer(t *testing.T) {
	tok, err := Load([]byte(miniTokenizerJSON))
	if err != nil {
		t.Fatal(err)
	}
	// Prepend and Replace give "▁ab▁b▁<m>▁a▁b▁éA"; <m> is cut from the raw
	// text with the spaces around it, "a b" from the normalized text; the
	// decoder's Strip removes a leading space of the fused text (here there
	// is none: it starts with <bos>).
	text := "ab b <m> a b éA"
	if got, want := tok.EncodeTokens(text), []string{"▁ab", "▁", "b", " <m> ", "▁a▁b", "▁", "<0xC3>", "<0xA9>", "<0x41>"}; !slices.Equal(got, want) {
		t.Errorf("tokens %q, want %q", got, want)
	}
	if got, want := tok.Decode(tok.Encode(text, true), false), "<bos> ab b<m>a b éA"; got != want {
		t.Errorf("decoded %q, want %q", got, want)
	}
}
