package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// referenceFile is the output of testdata/tools/tokenizer_reference.py: per
// text, the ids and token strings of encode(text, add_special_tokens=False),
// the ids of encode(text, add_special_tokens=True), and
// decode(ids, skip_special_tokens=False).
type referenceFile struct {
	Version string          `json:"tokenizers_version"`
	Cases   []referenceCase `json:"cases"`
}

type referenceCase struct {
	Text           string   `json:"text"`
	IDs            []int    `json:"ids"`
	Tokens         []string `json:"tokens"`
	IDsWithSpecial []int    `json:"ids_with_special"`
	Decoded        string   `json:"decoded"`
}

func readGzip(t testing.TB, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var gemma3 struct {
	once     sync.Once
	json     []byte
	tok      *Tokenizer
	err      error
	loadTime time.Duration
}

// gemma3Tokenizer loads the real Gemma 3 tokenizer once per test binary.
func gemma3Tokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	gemma3.once.Do(func() {
		gemma3.json = readGzip(t, "gemma3-tokenizer.json.gz")
		start := time.Now()
		gemma3.tok, gemma3.err = Load(gemma3.json)
		gemma3.loadTime = time.Since(start)
	})
	if gemma3.err != nil {
		t.Fatal(gemma3.err)
	}
	return gemma3.tok
}

func gemma3Config(t testing.TB) []byte {
	return readGzip(t, "gemma3-tokenizer_config.json.gz")
}

var tiny struct {
	once sync.Once
	json []byte
	tok  *Tokenizer
	err  error
}

// tinyTokenizer loads the tiny checkpoint's tokenizer (dgq/testmodel).
func tinyTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tiny.once.Do(func() {
		tiny.json, tiny.err = testmodel.ReadFile("tokenizer.json")
		if tiny.err == nil {
			tiny.tok, tiny.err = Load(tiny.json)
		}
	})
	if tiny.err != nil {
		t.Fatal(tiny.err)
	}
	return tiny.tok
}

// tinyJSON returns the tiny checkpoint's tokenizer.json.
func tinyJSON(t testing.TB) []byte {
	tinyTokenizer(t)
	return tiny.json
}

func tinyConfig(t testing.TB) []byte {
	t.Helper()
	b, err := testmodel.ReadFile("tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeReference(t testing.TB, b []byte) referenceFile {
	t.Helper()
	var r referenceFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Cases) == 0 {
		t.Fatal("reference has no cases")
	}
	return r
}
