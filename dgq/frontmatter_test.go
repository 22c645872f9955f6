package dgq

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseFrontMatter(t *testing.T) {
	cases := []struct {
		name   string
		doc    string
		ok     bool
		values map[string]string
		other  []string
	}{
		{"plain", "---\nlicense: apache-2.0\nlibrary_name: transformers\n---\n# x\n", true,
			map[string]string{"license": "apache-2.0", "library_name": "transformers"}, nil},
		{"crlf, bom, dots end", "\uFEFF---\r\nlicense: mit\r\n...\r\nbody", true, map[string]string{"license": "mit"}, nil},
		{"comments", "---\n# a comment\nlicense: gemma # the terms\n---\n", true, map[string]string{"license": "gemma"}, nil},
		{"hash inside a word", "---\nlicense_link: https://x.y/#terms\n---\n", true, map[string]string{"license_link": "https://x.y/#terms"}, nil},
		{"double-quoted", "---\nlicense_name: \"a \\\"b\\\" \\u00e9\" # c\n---\n", true, map[string]string{"license_name": `a "b" é`}, nil},
		{"single-quoted", "---\nlicense_name: 'it''s: #1'\n---\n", true, map[string]string{"license_name": "it's: #1"}, nil},
		{"yaml-only escape", "---\nlicense: \"\\x41\"\n---\n", true, map[string]string{}, []string{"license"}},
		{"list and nested keys", "---\nlicense:\n- mit\n- apache-2.0\nmodel-index:\n  license: nested\n---\n", true,
			map[string]string{}, []string{"license", "model-index"}},
		{"block, flow, null", "---\na: |\n  text\nb: [x, y]\nc: ~\nd: null\ne: &anchor v\n---\n", true,
			map[string]string{}, []string{"a", "b", "c", "d", "e"}},
		{"duplicate", "---\nlicense: mit\nlicense: gpl\n---\n", true, map[string]string{}, []string{"license"}},
		{"unclosed quote", "---\nlicense: \"mit\n---\n", true, map[string]string{}, []string{"license"}},
		{"text after a quote", "---\nlicense: \"mit\" x\n---\n", true, map[string]string{}, []string{"license"}},
		{"not a key", "---\n- item\nhttp://x\n  indented: y\n\"q\": 1\n---\n", true, map[string]string{}, nil},
		{"no front matter", "# title\nlicense: mit\n", false, nil, nil},
		{"not closed", "---\nlicense: mit\n", false, nil, nil},
		{"empty", "", false, nil, nil},
		{"dashes later", "\n---\nlicense: mit\n---\n", false, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fm, ok := parseFrontMatter([]byte(c.doc))
			if ok != c.ok {
				t.Fatalf("ok %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if !maps.Equal(fm.values, c.values) {
				t.Errorf("values %q, want %q", fm.values, c.values)
			}
			if got := slices.Sorted(maps.Keys(fm.other)); !slices.Equal(got, c.other) {
				t.Errorf("other %q, want %q", got, c.other)
			}
		})
	}
}

func TestYAMLScalar(t *testing.T) {
	for in, want := range map[string]string{
		"apache-2.0":               "apache-2.0",
		"google/diffusiongemma-it": "google/diffusiongemma-it",
		"q4":                       "q4",
		"":                         `""`,
		"yes":                      `"yes"`,
		"Off":                      `"Off"`,
		"null":                     `"null"`,
		"01-ai/Yi":                 `"01-ai/Yi"`,
		"1.0":                      `"1.0"`,
		".inf":                     `".inf"`,
		"a: b":                     `"a: b"`,
		"x #y":                     `"x #y"`,
		"line\nbreak":              `"line\nbreak"`,
		"<b>&":                     `"<b>&"`,
		"nel\u0085":                `"nel\u0085"`,
		"bad\xff":                  `"bad\ufffd"`,
	} {
		if got := yamlScalar(in); got != want {
			t.Errorf("yamlScalar(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzParseFrontMatter: any document parses without a panic; every value
// read is one line and every key a plain word.
func FuzzParseFrontMatter(f *testing.F) {
	for _, s := range []string{"---\nlicense: mit\n---\n", "---\nlicense: \"a\\\"\" # c\n...\n", "---\nx: 'it''s'\ny:\n- 1\n---",
		"\uFEFF---\r\na: b\r\n---\r\n", "---\n---\n", "---\na: \"\\", "---\na: '"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		fm, ok := parseFrontMatter(doc)
		if !ok {
			if fm.values != nil || fm.other != nil {
				t.Fatal("values without front matter")
			}
			return
		}
		for k, v := range fm.values {
			if !frontMatterKey(k) || fm.other[k] {
				t.Fatalf("key %q", k)
			}
			if strings.Contains(v, "\n") || !utf8.ValidString(v) {
				t.Fatalf("value %q of %q", v, k)
			}
		}
	})
}

// FuzzYAMLScalarRoundTrip: what yamlScalar writes, parseFrontMatter reads
// back as the same string (invalid UTF-8 as U+FFFD), always on one line.
func FuzzYAMLScalarRoundTrip(f *testing.F) {
	for _, s := range []string{"", "mit", "yes", "a: b", "x # y", "'q'", `"q"`, "\\", "\t", "\u2028", "\u0085", "é", "\xff", " lead", "trail ", "- item"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := yamlScalar(s)
		if strings.ContainsAny(out, "\n\r") {
			t.Fatalf("yamlScalar(%q) = %q spans lines", s, out)
		}
		fm, ok := parseFrontMatter([]byte("---\nkey: " + out + "\n---\n"))
		if !ok {
			t.Fatalf("no front matter for %q", out)
		}
		want := string([]rune(s)) // each invalid byte a U+FFFD
		if got, found := fm.values["key"]; !found || got != want {
			t.Fatalf("yamlScalar(%q) = %s reads back as %q (found %v)", s, out, got, found)
		}
	})
}
