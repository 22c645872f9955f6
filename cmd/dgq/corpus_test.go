package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/dgq-dev/dgq/overlay"
)

// The corrupt-pack corpus (testdata/corrupt, made by dgq/internal/corruptgen):
// every damaged pack is refused by the loader and audit reports each of its
// faults, with a non-zero exit; inspect never crashes on any of them.
func TestCorruptCorpus(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "corrupt")
	t.Setenv("DGQ_HF_HOME", filepath.Join(root, "hub"))
	data, err := os.ReadFile(filepath.Join(root, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]struct {
		Kinds  []string `json:"kinds"`
		Tensor string   `json:"tensor"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 14 {
		t.Fatalf("corpus has %d cases", len(cases))
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			r := dgqRun("audit", "--json", dir)
			var rep struct {
				OK       bool `json:"ok"`
				Findings []struct {
					Tensor, Kind, Message string
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("audit --json output %q: %v", r.stdout, err)
			}
			p, openErr := overlay.Open(dir)
			if p != nil {
				p.Close()
			}
			if len(want.Kinds) == 0 {
				if r.code != 0 || !rep.OK || openErr != nil {
					t.Fatalf("good pack: exit %d, findings %v, open %v", r.code, rep.Findings, openErr)
				}
				return
			}
			if r.code == 0 || rep.OK {
				t.Fatalf("audit passed a damaged pack (exit %d)", r.code)
			}
			if openErr == nil {
				t.Fatal("the loader accepted a damaged pack")
			}
			kinds := map[string]bool{}
			named := false
			for _, f := range rep.Findings {
				kinds[f.Kind] = true
				named = named || (want.Tensor != "" && f.Tensor == want.Tensor)
			}
			for _, k := range want.Kinds {
				if !kinds[k] {
					t.Errorf("no %q finding in %+v", k, rep.Findings)
				}
			}
			if want.Tensor != "" && !named {
				t.Errorf("no finding names %s: %+v", want.Tensor, rep.Findings)
			}
			if kinds["stale"] && !strings.Contains(r.stdout, "dgq download dgq-test/corrupt-base") {
				t.Errorf("stale finding without the fix command: %s", r.stdout)
			}
			ir := dgqRun("inspect", "--json", dir)
			if strings.Contains(ir.stderr, "panic") || (ir.code != 0 && ir.code != exitInvalid) {
				t.Errorf("inspect: exit %d, stderr %q", ir.code, ir.stderr)
			}
		})
	}
}

// goIdentifier matches a Go identifier written into a message: a CamelCase
// word (MaxNewTokens, ParseInt) or a lowerCamel one (canvasLength).
var goIdentifier = regexp.MustCompile(`^(?:[A-Z][a-z0-9]+[A-Z]|[a-z]+[A-Z])[A-Za-z0-9]*$`)

// notIdentifiers are the CamelCase words a message may hold: names, not code.
var notIdentifiers = map[string]bool{"DiffusionGemma": true, "GitHub": true, "macOS": true, "cuBLAS": true}

// messageFaults lists what is wrong with an error line as a user reads it:
// more than one line, no "dgq: " at its start or a second one inside, a Go
// package's prefix, a Go identifier.
func messageFaults(stderr string) []string {
	var faults []string
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "dgq: ") {
		return []string{"not one line starting with dgq: "}
	}
	msg := strings.TrimPrefix(lines[0], "dgq: ")
	if strings.Contains(msg, "dgq: ") {
		faults = append(faults, "a doubled dgq: prefix")
	}
	if m := packagePrefix.FindString(msg); m != "" {
		faults = append(faults, fmt.Sprintf("a package prefix %q", m))
	}
	words := strings.FieldsFunc(msg, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '/' && r != '.' && r != '_' && r != '-'
	})
	for _, w := range words {
		if strings.ContainsAny(w, "/") { // a path or ORG/NAME
			continue
		}
		for _, part := range strings.Split(w, ".") { // strconv.ParseInt, tokenizer.json
			if goIdentifier.MatchString(part) && !notIdentifiers[part] {
				faults = append(faults, fmt.Sprintf("a Go identifier %q", part))
			}
		}
	}
	return faults
}

// TestBadCommandLines runs a corpus of wrong command lines (typos, bad
// flags and values, missing or damaged inputs, every command): each fails
// with a non-zero code and one line on stderr that reads as a sentence for
// the user: "dgq: " once, no Go package prefix (layout:, hfcache:, …), no Go
// identifier, cobra's multi-line suggestions folded into one line.
func TestBadCommandLines(t *testing.T) {
	corrupt := filepath.Join("..", "..", "testdata", "corrupt")
	t.Setenv("DGQ_HF_HOME", filepath.Join(t.TempDir(), "empty-hub"))
	src := tiny(t)
	pack := demoPack(t, "q4")
	empty := t.TempDir()
	missing := filepath.Join(empty, "missing")
	out := func() string { return filepath.Join(t.TempDir(), "out") }
	corpus := []struct {
		args    []string
		code    int
		mention string
	}{
		{[]string{"quantise"}, exitUsage, `unknown command "quantise"; did you mean quantize?`},
		{[]string{"frobnicate"}, exitUsage, "frobnicate"},
		{[]string{"inspect"}, exitUsage, "missing PACK"},
		{[]string{"inspect", "a", "b"}, exitUsage, `unexpected argument "b"`},
		{[]string{"quantize", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"quantize", "--bogus"}, exitUsage, "--bogus"},
		{[]string{"quantize", "--profile", "q9", "-m", src, "-o", out()}, exitUsage, "q9"},
		{[]string{"quantize", "--profile", "q4", "--set", "attn=q9", "-m", src, "-o", out()}, exitUsage, "q9"},
		{[]string{"quantize", "--profile", "q4", "--set", "embed=q4", "-m", src, "-o", out()}, exitUsage, "embed"},
		{[]string{"quantize", "--profile", "q4", "--set", "attn", "-m", src, "-o", out()}, exitUsage, "target=format"},
		{[]string{"quantize", "--profile", "q4", "--set", "mlp=q4", "-m", src, "-o", out()}, exitUsage, "mlp"},
		{[]string{"quantize", "--profile", "q4", "--encoder", "fast", "-m", src, "-o", out()}, exitUsage, "fast"},
		{[]string{"quantize", "--profile", "q4", "-m", missing, "-o", out()}, exitInvalid, "missing"},
		{[]string{"quantize", "--profile", "q4", "-m", "nope/nope", "-o", out()}, exitStale, "dgq download nope/nope"},
		{[]string{"quantize", "--profile", "q4", "-m", src, "-o", pack}, exitUsage, "--force"},
		{[]string{"quantize", "--profile", "q4", "-m", src, "--workers", "many"}, exitUsage, "--workers"},
		{[]string{"inspect", empty}, exitInvalid, "not a dgq pack"},
		{[]string{"inspect", "nope/nope"}, exitStale, "dgq download"},
		{[]string{"inspect", filepath.Join(corrupt, "garbage-manifest")}, exitInvalid, "manifest"},
		{[]string{"inspect", filepath.Join(corrupt, "earlier-dgq-format")}, exitInvalid, "manifest"},
		{[]string{"audit", filepath.Join(corrupt, "flipped-byte")}, exitInvalid, "1 problem"},
		{[]string{"run", pack, "--prompt", " "}, exitUsage, "--prompt"},
		{[]string{"run", empty, "--prompt", "hi"}, exitInvalid, "not a dgq pack"},
		{[]string{"run", pack, "--prompt", "hi", "--backend", "tpu"}, exitUsage, "tpu"},
		{[]string{"run", pack, "--prompt", "hi", "--seed", "-1"}, exitUsage, "--seed"},
		{[]string{"run", pack, "--prompt", "hi", "--max-new-tokens", "-1"}, exitUsage, "--max-new-tokens"},
		{[]string{"run", pack, "--prompt", "hi", "--max-steps", "99999999"}, exitUsage, "--max-steps"},
		{[]string{"verify", pack, "--prompt-len", "0"}, exitUsage, "--prompt-len"},
		{[]string{"run", filepath.Join(corrupt, "truncated-blob"), "--prompt", "hi", "--max-new-tokens", "8"}, exitInvalid, "truncated-blob"},
		{[]string{"verify", pack, "--windows", "abc"}, exitUsage, "--windows"},
		{[]string{"verify", pack, "--noise-rates", "x"}, exitUsage, "--noise-rates"},
		{[]string{"verify", pack}, exitUsage, "--source"},
		{[]string{"verify", pack, "--source", src, "--text", missing}, exitInvalid, "missing"},
		{[]string{"parity", pack}, exitUsage, "--reference"},
		{[]string{"parity", pack, "--reference", missing}, exitInvalid, "missing"},
		{[]string{"tokenize", empty, "hi"}, exitInvalid, "tokenizer.json"},
		{[]string{"tokenize", pack, "bad \xff byte"}, exitUsage, "UTF-8"},
		{[]string{"bench", pack, "--reps", "0"}, exitUsage, "--reps"},
		{[]string{"bench", filepath.Join(corrupt, "future-version"), "--prompt-len", "8"}, exitInvalid, "version"},
		{[]string{"smoke", empty}, exitInvalid, "not a dgq pack"},
		{[]string{"repack", "-m", pack, "-o", out()}, exitUsage, "--overlay"},
		{[]string{"card", empty}, exitInvalid, "not a dgq pack"},
		{[]string{"demo", "--profile", "q9"}, exitUsage, "q9"},
		{[]string{"synth"}, exitUsage, "-o"},
		{[]string{"synth", "-o", out(), "--layers", "99"}, exitUsage, "--layers"},
		{[]string{"download", "not a repo"}, exitUsage, "not a repo"},
		{[]string{"selftest", "--backend", "tpu"}, exitUsage, "tpu"},
		{[]string{"doctor", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"version", "extra"}, exitUsage, `unexpected argument "extra"`},
	}
	for _, c := range corpus {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := dgqRun(c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d: %q", r.code, c.code, r.stderr)
			}
			if !strings.Contains(r.stderr, c.mention) {
				t.Errorf("%q does not mention %q", r.stderr, c.mention)
			}
			for _, f := range messageFaults(r.stderr) {
				t.Errorf("%s in %q", f, r.stderr)
			}
		})
	}
}

// TestMessageCleanup: the central cleanup of messages strips Go package
// prefixes where the library puts them — at the start of the message or of
// a part of it — and nowhere else; the backends' names stay.
func TestMessageCleanup(t *testing.T) {
	for in, want := range map[string]string{
		"dgq: invalid manifest: x":                          "invalid manifest: x",
		"pack a/b: hfcache: not in the hub cache: repo a/b": "pack a/b: not in the hub cache: repo a/b",
		"x: dgq: dgq: invalid manifest":                     "x: invalid manifest",
		"layout: --set attn=q9: codecs: unknown format":     "--set attn=q9: unknown format",
		"a\nhub: b\n  session: c":                           "a; b; c",
		"backend unavailable: cuda: no device":              "backend unavailable: cuda: no device",
		"metal unavailable: needs macOS on Apple silicon":   "metal unavailable: needs macOS on Apple silicon",
		"the source model: layout is fine (model: check)":   "the source model: layout is fine (check)",
		"unknown profile \"Q9\" (valid: bf16, q4)":          "unknown profile \"Q9\" (valid: bf16, q4)",
		"overlay: tensor x: write: no space left on device": "tensor x: write: no space left on device",
	} {
		if got := message(in); got != want {
			t.Errorf("message(%q) = %q, want %q", in, got, want)
		}
	}
}
