package tokenizer

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// extraReference is testdata/extra/*-extra-reference.json.gz, made by
// testdata/extra/reference.py with tokenizers 0.23.2: the fields of the main
// reference plus decodings with skip_special_tokens=True and decodings of
// random id sequences.
type extraReference struct {
	Version string `json:"tokenizers_version"`
	Cases   []struct {
		referenceCase
		DecodedSkip string `json:"decoded_skip"`
	} `json:"cases"`
	IDCases []struct {
		IDs         []int  `json:"ids"`
		Decoded     string `json:"decoded"`
		DecodedSkip string `json:"decoded_skip"`
	} `json:"id_cases"`
}

// checkExtra compares tok with an extended reference (a gzip file under
// testdata) and returns the number of text and id cases, and of those that
// match.
func checkExtra(t *testing.T, refFile string, tok *Tokenizer) (cases, matched, idCases, idMatched int) {
	t.Helper()
	var ref extraReference
	dec := json.NewDecoder(bytes.NewReader(readGzip(t, refFile)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		t.Fatal(err)
	}
	if ref.Version != "0.23.2" || len(ref.Cases) == 0 || len(ref.IDCases) == 0 {
		t.Fatalf("bad reference: version %q, %d cases, %d id cases", ref.Version, len(ref.Cases), len(ref.IDCases))
	}
	for i, c := range ref.Cases {
		ok := checkReference(t, tok, referenceFile{Cases: []referenceCase{c.referenceCase}}) == 1
		if got := tok.Decode(c.IDsWithSpecial, true); got != c.DecodedSkip {
			t.Errorf("case %d %q: decoded_skip\n got %q\nwant %q", i, c.Text, got, c.DecodedSkip)
			ok = false
		}
		if ok {
			matched++
		}
	}
	for i, c := range ref.IDCases {
		ok := true
		if got := tok.Decode(c.IDs, false); got != c.Decoded {
			t.Errorf("id case %d %v: decoded\n got %q\nwant %q", i, c.IDs, got, c.Decoded)
			ok = false
		}
		if got := tok.Decode(c.IDs, true); got != c.DecodedSkip {
			t.Errorf("id case %d %v: decoded_skip\n got %q\nwant %q", i, c.IDs, got, c.DecodedSkip)
			ok = false
		}
		if ok {
			idMatched++
		}
	}
	return len(ref.Cases), matched, len(ref.IDCases), idMatched
}

func TestGemma3ExtraReference(t *testing.T) {
	n, m, ni, mi := checkExtra(t, "extra/gemma3-extra-reference.json.gz", gemma3Tokenizer(t))
	t.Logf("gemma3: %d/%d extra text cases and %d/%d id sequences match", m, n, mi, ni)
}

func TestTinyExtraReference(t *testing.T) {
	n, m, ni, mi := checkExtra(t, "extra/tiny-extra-reference.json.gz", tinyTokenizer(t))
	t.Logf("tiny: %d/%d extra text cases and %d/%d id sequences match", m, n, mi, ni)
}

// The variants of the tiny tokenizer (testdata/extra/make_variants.py) use
// the settings the two real files leave unused: added-token flags (lstrip,
// rstrip, single_word, normalized), Prepend, every Split behaviour with and
// without invert, Strip, legacy merges with ignore_merges and without byte
// fallback or fuse_unk, and no components at all.
func TestVariantReferences(t *testing.T) {
	names, err := filepath.Glob("testdata/variants/tiny-*-reference.json.gz")
	if err != nil || len(names) == 0 {
		t.Fatalf("no variant references: %v", err)
	}
	var total, ok int
	for _, refPath := range names {
		name := strings.TrimSuffix(filepath.Base(refPath), "-reference.json.gz")
		t.Run(name, func(t *testing.T) {
			tok, err := Load(readGzip(t, "variants/"+name+".json.gz"))
			if err != nil {
				t.Fatal(err)
			}
			n, m, ni, mi := checkExtra(t, "variants/"+name+"-reference.json.gz", tok)
			total += n + ni
			ok += m + mi
		})
	}
	t.Logf("%d variants: %d/%d cases match", len(names), ok, total)
}
