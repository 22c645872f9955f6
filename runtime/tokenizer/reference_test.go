package tokenizer

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// checkReference compares every case of a reference file field by field and
// returns how many cases matched completely.
func checkReference(t *testing.T, tok *Tokenizer, ref referenceFile) int {
	t.Helper()
	matched := 0
	for i, c := range ref.Cases {
		ok := true
		if got := tok.Encode(c.Text, false); !slices.Equal(got, c.IDs) {
			t.Errorf("case %d %q: ids\n got %v\nwant %v", i, c.Text, got, c.IDs)
			ok = false
		}
		if got := tok.EncodeTokens(c.Text); !slices.Equal(got, c.Tokens) {
			t.Errorf("case %d %q: tokens\n got %q\nwant %q", i, c.Text, got, c.Tokens)
			ok = false
		}
		if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDsWithSpecial) {
			t.Errorf("case %d %q: ids_with_special\n got %v\nwant %v", i, c.Text, got, c.IDsWithSpecial)
			ok = false
		}
		if got := tok.Decode(c.IDs, false); got != c.Decoded {
			t.Errorf("case %d %q: decoded\n got %q\nwant %q", i, c.Text, got, c.Decoded)
			ok = false
		}
		if ok {
			matched++
		}
	}
	return matched
}

func TestGemma3Reference(t *testing.T) {
	tok := gemma3Tokenizer(t)
	ref := decodeReference(t, readTestdata(t, "gemma3-reference.json"))
	if ref.Version != "0.23.2" {
		t.Errorf("reference made by tokenizers %q", ref.Version)
	}
	var texts []string
	if err := json.Unmarshal(readTestdata(t, "gemma3-strings.json"), &texts); err != nil {
		t.Fatal(err)
	}
	if len(texts) != len(ref.Cases) {
		t.Fatalf("%d strings, %d reference cases", len(texts), len(ref.Cases))
	}
	for i, c := range ref.Cases {
		if c.Text != texts[i] {
			t.Errorf("reference case %d is %q, strings.json has %q", i, c.Text, texts[i])
		}
	}
	n := checkReference(t, tok, ref)
	t.Logf("gemma3: %d/%d reference cases match (ids, tokens, ids_with_special, decoded); load took %v",
		n, len(ref.Cases), gemma3.loadTime)
	if n != len(ref.Cases) {
		t.Fatalf("only %d of %d cases match", n, len(ref.Cases))
	}
}

func TestTinyReference(t *testing.T) {
	tok := tinyTokenizer(t)
	b, err := testmodel.ReadReference("tokenizer_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	ref := decodeReference(t, b)
	n := checkReference(t, tok, ref)
	t.Logf("tiny: %d/%d reference cases match", n, len(ref.Cases))
	if n != len(ref.Cases) {
		t.Fatalf("only %d of %d cases match", n, len(ref.Cases))
	}
}
