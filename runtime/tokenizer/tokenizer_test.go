package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// roundTripTexts are decoded back exactly by both tokenizers.
var roundTripTexts = []string{
	"",
	" ",
	"   ",
	"a",
	"Hello, world!",
	"  leading and trailing spaces  ",
	"multiple   inner    spaces",
	"tabs\tand\t\ttabs\t",
	"new\nlines\n\n\nand\r\ncarriage returns\r",
	"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
	strings.Repeat(" ", 70),
	strings.Repeat("\t", 40),
	"emoji 🤖🚀 family 👩\u200d👩\u200d👧\u200d👦 flag 🇫🇷 skin 👍🏽 heart ❤️",
	"CJK 日本語のテキストと中文文本，还有한국어.",
	"combining: e\u0301 a\u0308 o\u0302\u0323 \u0301 lone mark, क्ष",
	"Ünïcödé naïve café résumé — “quotes” and ‘apostrophes’",
	"math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀 𐍈 private \ue000 \U000f0000 \U0010fffd bom \ufeff",
	"controls \x00\x01\x02\x07\x08\x0b\x0c\x1b\x1f\x7f \u0080\u0085\u009f",
	"nbsp\u00a0ideographic\u3000em\u2003zwsp\u200b",
	"<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
	"<bos><eos><pad><unk> literal special tokens",
	"half specials <start_of <end_of_turn <bos <0xZZ> <0x4 [multimodal] <mask>",
	"code:\n    def f(x):\n        return x ** 2  # square\n",
	"1234567890 3.14159 -42 1e-6 0x7fff",
	"\ufffd replacement char",
}

func TestRoundTrip(t *testing.T) {
	for name, tok := range map[string]*Tokenizer{"gemma3": gemma3Tokenizer(t), "tiny": tinyTokenizer(t)} {
		for _, s := range roundTripTexts {
			ids := tok.Encode(s, false)
			if got := tok.Decode(ids, false); got != s {
				t.Errorf("%s: Decode(Encode(%q)) = %q", name, s, got)
			}
			withBOS := tok.Encode(s, true)
			if len(withBOS) != len(ids)+1 || withBOS[0] != 2 || !slices.Equal(withBOS[1:], ids) {
				t.Errorf("%s: Encode(%q, true) = %v, want <bos> + %v", name, s, withBOS, ids)
			}
			if got := tok.Decode(withBOS, false); got != "<bos>"+s {
				t.Errorf("%s: Decode(<bos>+ids) = %q", name, got)
			}
			toks := tok.EncodeTokens(s)
			if len(toks) != len(ids) {
				t.Fatalf("%s: %q: %d tokens but %d ids", name, s, len(toks), len(ids))
			}
			for i, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("%s: %q: id %d out of range", name, s, id)
				}
				if got, ok := tok.TokenID(toks[i]); !ok || got != id {
					t.Errorf("%s: %q: TokenID(%q) = %d, %v; want %d", name, s, toks[i], got, ok, id)
				}
			}
		}
	}
}

// The decoder maps "▁" back to a space, so the one text that does not round
// trip is one holding "▁" itself.
func TestMetaspaceCharacterDecodesAsSpace(t *testing.T) {
	tok := gemma3Tokenizer(t)
	s := "a▁b ▁"
	if got, want := tok.Decode(tok.Encode(s, false), false), "a b  "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSpecialTokens(t *testing.T) {
	tok := gemma3Tokenizer(t)
	ids := tok.Encode("<start_of_turn>user\nhi<end_of_turn>", false)
	want := []int{105, 2364, 107, 2202, 106}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	for _, c := range []struct {
		id      int
		special bool
	}{{0, true}, {1, true}, {2, true}, {3, true}, {4, false}, {105, true}, {106, true}, {107, false}, {2364, false}, {262144, true}, {262145, false}, {-1, false}} {
		if got := tok.IsSpecial(c.id); got != c.special {
			t.Errorf("IsSpecial(%d) = %v", c.id, got)
		}
	}
	if got := tok.Decode(tok.Encode("<bos>x<start_of_turn>y<unused3>", false), true); got != "xy<unused3>" {
		t.Errorf("Decode skipping specials = %q", got)
	}
	if id, ok := tok.TokenID("<image_soft_token>"); !ok || id != 262144 {
		t.Errorf("TokenID(<image_soft_token>) = %d, %v", id, ok)
	}
	if s, ok := tok.Token(262144); !ok || s != "<image_soft_token>" {
		t.Errorf("Token(262144) = %q, %v", s, ok)
	}
	if _, ok := tok.TokenID("no such token at all"); ok {
		t.Error("TokenID of an unknown string succeeded")
	}
	if got := tok.VocabSize(); got != 262145 {
		t.Errorf("VocabSize = %d, want 262145", got)
	}
	if got := tinyTokenizer(t).VocabSize(); got != 512 {
		t.Errorf("tiny VocabSize = %d, want 512", got)
	}
	// Ids outside the vocabulary are dropped, as by the library.
	if got := tok.Decode([]int{-5, 9259, 1 << 40, 262145, 236888}, false); got != "Hello!" {
		t.Errorf("Decode with bad ids = %q", got)
	}
}

func TestByteFallback(t *testing.T) {
	tok := gemma3Tokenizer(t)
	// U+1D518 (𝔘) is not in the vocabulary: four byte tokens.
	toks := tok.EncodeTokens("𝔘")
	want := []string{"<0xF0>", "<0x9D>", "<0x94>", "<0x98>"}
	if !slices.Equal(toks, want) {
		t.Fatalf("tokens %q, want %q", toks, want)
	}
	ids := tok.Encode("𝔘", false)
	for i, id := range ids {
		if s, _ := tok.Token(id); s != want[i] {
			t.Errorf("id %d is %q, want %q", id, s, want[i])
		}
	}
	// Bytes that do not make UTF-8 decode to one U+FFFD each, as the
	// library's ByteFallback decoder does.
	f0, _ := tok.TokenID("<0xF0>")
	x9d, _ := tok.TokenID("<0x9D>")
	a, _ := tok.TokenID("a")
	if got, want := tok.Decode([]int{f0, x9d, a, f0}, false), "\uFFFD\uFFFDa\uFFFD"; got != want {
		t.Errorf("Decode of broken bytes = %q, want %q", got, want)
	}
	// Invalid UTF-8 in the input is encoded byte by byte.
	ids = tok.Encode("a\xffb", false)
	if len(ids) != 3 || !isToken(tok, ids[1], "<0xFF>") {
		t.Errorf("Encode(a\\xffb) = %v", ids)
	}
	if got := tok.Decode(ids, false); got != "a\uFFFDb" {
		t.Errorf("Decode(Encode(a\\xffb)) = %q", got)
	}
	// The tiny vocabulary lacks "é": e + combining acute is byte fallback.
	tiny := tinyTokenizer(t)
	if got := tiny.EncodeTokens("\u0301"); !slices.Equal(got, []string{"<0xCC>", "<0x81>"}) {
		t.Errorf("tiny tokens of U+0301: %q", got)
	}
	// The tiny tokenizer lists its byte tokens as special added tokens, so
	// the text "<0x41>" is that token, which decodes to "A" (or nothing when
	// skipping special tokens); in Gemma 3 it is plain text.
	if got := tiny.Encode("<0x41>", false); len(got) != 1 || !isToken(tiny, got[0], "<0x41>") {
		t.Errorf("tiny Encode(<0x41>) = %v", got)
	}
	if got := tiny.Decode(tiny.Encode("x<0x41>", false), false); got != "xA" {
		t.Errorf("tiny Decode = %q", got)
	}
	if got := tiny.Decode(tiny.Encode("x<0x41>", false), true); got != "x" {
		t.Errorf("tiny Decode skipping specials = %q", got)
	}
	if got := tok.Decode(tok.Encode("<0x41>", false), false); got != "<0x41>" {
		t.Errorf("gemma3 round trip of <0x41> = %q", got)
	}
}

func TestUnknownWithoutByteFallback(t *testing.T) {
	src := strings.Replace(string(tinyJSON(t)), `"byte_fallback": true`, `"byte_fallback": false`, 1)
	if src == string(tinyJSON(t)) {
		t.Fatal("byte_fallback setting not found")
	}
	tok, err := Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// Unknown characters become <unk> (id 3), fused over a run.
	if got := tok.Encode("a😀😀b😀", false); !slices.Equal(got, []int{322, 3, 323, 3}) {
		t.Errorf("ids %v", got)
	}
	src = strings.Replace(src, `"fuse_unk": true`, `"fuse_unk": false`, 1)
	tok, err = Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("a😀😀b😀", false); !slices.Equal(got, []int{322, 3, 3, 323, 3}) {
		t.Errorf("ids without fuse_unk %v", got)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, tinyJSON(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, dir} {
		tok, err := LoadFile(p)
		if err != nil {
			t.Fatalf("LoadFile(%s): %v", p, err)
		}
		if tok.VocabSize() != 512 {
			t.Errorf("LoadFile(%s): vocab %d", p, tok.VocabSize())
		}
	}
	// Issue 21: a missing path is invalid input (exit 3, as a missing pack),
	// not an I/O failure.
	if _, err := LoadFile(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "tokenizer: ") ||
		!errors.Is(err, ErrMissing) || errclass.Of(err) != errclass.Invalid {
		t.Errorf("missing file: %v", err)
	}
	empty := t.TempDir()
	if _, err := LoadFile(empty); err == nil || !errors.Is(err, ErrMissing) || errclass.Of(err) != errclass.Invalid {
		t.Errorf("directory without tokenizer.json: %v", err)
	}
}

func TestLoadTooLarge(t *testing.T) {
	_, err := Load(make([]byte, MaxFileSize+1))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v", err)
	}
}

func TestEncodeSpeed(t *testing.T) {
	tok := gemma3Tokenizer(t)
	text := strings.Repeat("Diffusion language models denoise a whole canvas of tokens in parallel. 日本語 🤖\n", 50)
	start := time.Now()
	ids := tok.Encode(text, true)
	d := time.Since(start)
	t.Logf("encoded %d bytes into %d ids in %v; load took %v", len(text), len(ids), d, gemma3.loadTime)
	if d > 500*time.Millisecond {
		t.Errorf("encoding %d bytes took %v", len(text), d)
	}
	if got := tok.Decode(ids, true); got != text {
		t.Error("round trip failed")
	}
	if !utf8.ValidString(tok.Decode(ids, false)) {
		t.Error("invalid UTF-8")
	}
}

func BenchmarkEncodeGemma3(b *testing.B) {
	tok := gemma3Tokenizer(b)
	text := strings.Repeat("Diffusion language models denoise a whole canvas of tokens in parallel. 日本語 🤖\n", 50)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tok.Encode(text, true)
	}
}

func BenchmarkLoadGemma3(b *testing.B) {
	data := readGzip(b, "gemma3-tokenizer.json.gz")
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
}

func isToken(tok *Tokenizer, id int, s string) bool {
	got, ok := tok.Token(id)
	return ok && got == s
}

// A Tokenizer is used from several goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	tok := tinyTokenizer(t)
	want := make([][]int, len(roundTripTexts))
	for i, s := range roundTripTexts {
		want[i] = tok.Encode(s, true)
	}
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for k := 0; k < 20; k++ {
				for i, s := range roundTripTexts {
					if got := tok.Encode(s, true); !slices.Equal(got, want[i]) {
						done <- errors.New("different ids for " + s)
						return
					}
					tok.Decode(want[i], k%2 == 0)
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
