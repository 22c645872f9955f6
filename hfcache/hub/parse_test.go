package hub

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/internal/errclass"
)

func TestParseNextLink(t *testing.T) {
	cases := []struct {
		name   string
		values []string
		want   string
		bad    bool
	}{
		{"none", nil, "", false},
		{"empty", []string{""}, "", false},
		{"hub", []string{`<https://huggingface.co/api/models/a/b/tree/main?recursive=true&cursor=abc>; rel="next"`}, "https://huggingface.co/api/models/a/b/tree/main?recursive=true&cursor=abc", false},
		{"unquoted rel", []string{`</p?c=1>; rel=next`}, "/p?c=1", false},
		{"case and spaces", []string{` <u1> ;REL = "NEXT" `}, "u1", false},
		{"several links", []string{`<first>; rel="first", <n,ext>; rel="next", <last>; rel="last"`}, "n,ext", false},
		{"several rel values", []string{`<x>; rel="prev next"`}, "x", false},
		{"two lines", []string{`<a>; rel="prev"`, `<b>; rel="next"`}, "b", false},
		{"other params", []string{`<a>; title="x; y, z"; rel="next"; anchor="#"`}, "a", false},
		{"escaped quote", []string{`<a>; title="say \"hi\""; rel=next`}, "a", false},
		{"no next", []string{`<a>; rel="prev"`}, "", false},
		{"first rel wins", []string{`<a>; rel="prev"; rel="next"`}, "", false},
		{"unterminated target", []string{`<a; rel="next"`}, "", true},
		{"no target", []string{`rel="next"`}, "", true},
		{"unterminated quote", []string{`<a>; rel="next`}, "", true},
		{"param without name", []string{`<a>; ="next"`}, "", true},
		{"missing value", []string{`<a>; rel=`}, "", true},
		{"junk after target", []string{`<a> junk; rel=next`}, "", true},
		{"space in target", []string{`<a b>; rel=next`}, "", true},
		{"too long", []string{"<" + strings.Repeat("a", maxLinkHeader) + ">; rel=next"}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseNextLink(c.values)
			if c.bad != (err != nil) || got != c.want {
				t.Fatalf("got %q, %v; want %q, error %v", got, err, c.want, c.bad)
			}
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
		})
	}
}

func TestParseTreePage(t *testing.T) {
	sha1 := strings.Repeat("a", 40)
	sha256 := strings.Repeat("b", 64)
	cases := []struct {
		name string
		json string
		want []Entry
		bad  string
	}{
		{"empty", `[]`, []Entry{}, ""},
		{"file, folder, lfs", `[{"type":"directory","oid":"` + sha1 + `","size":0,"path":"d"},
			{"type":"file","oid":"` + sha1 + `","size":5,"path":"d/x.json"},
			{"type":"file","oid":"` + sha1 + `","size":9,"path":"m.bin","lfs":{"oid":"` + sha256 + `","size":9,"pointerSize":130},"xetHash":"abc"}]`,
			[]Entry{{Path: "d/x.json", Size: 5, OID: sha1}, {Path: "m.bin", Size: 9, OID: sha1, LFS: true, SHA256: sha256, XetHash: "abc"}}, ""},
		{"unknown type skipped", `[{"type":"submodule","path":"../x"}]`, []Entry{}, ""},
		{"not an array", `{"type":"file"}`, nil, "JSON array"},
		{"trailing data", `[] []`, nil, "after"},
		{"no size", `[{"type":"file","oid":"` + sha1 + `","path":"a"}]`, nil, "no size"},
		{"negative size", `[{"type":"file","oid":"` + sha1 + `","size":-1,"path":"a"}]`, nil, "out of range"},
		{"float size", `[{"type":"file","oid":"` + sha1 + `","size":1.5,"path":"a"}]`, nil, "JSON"},
		{"bad oid", `[{"type":"file","oid":"XYZ","size":1,"path":"a"}]`, nil, "oid"},
		{"upper-case oid", `[{"type":"file","oid":"` + strings.ToUpper(sha1) + `","size":1,"path":"a"}]`, nil, "oid"},
		{"bad lfs oid", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"a","lfs":{"oid":"x","size":1}}]`, nil, "lfs oid"},
		{"lfs without size", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"a","lfs":{"oid":"` + sha256 + `"}}]`, nil, "lfs has no size"},
		{"dot-dot", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"a/../../etc/passwd"}]`, nil, `".."`},
		{"absolute", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"/etc/passwd"}]`, nil, "absolute"},
		{"backslash", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"a\\b"}]`, nil, "backslash"},
		{"empty element", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"a//b"}]`, nil, "empty"},
		{"newline", `[{"type":"file","oid":"` + sha1 + `","size":1,"path":"a\nb"}]`, nil, "control"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTreePage([]byte(c.json))
			if c.bad != "" {
				if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.bad) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one mentioning %q", err, c.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %+v", got)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("entry %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestCheckListing(t *testing.T) {
	e := func(p string) Entry { return Entry{Path: p} }
	if err := checkListing([]Entry{e("a"), e("b/c"), e("b/d")}); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][]Entry{{e("a"), e("a")}, {e("a"), e("a/b")}, {e("x/a/b/c"), e("x/a")}} {
		if err := checkListing(l); !errors.Is(err, ErrProtocol) {
			t.Errorf("%v: err = %v", l, err)
		}
	}
}

func TestTreeCacheRoundTrip(t *testing.T) {
	in := []Entry{
		{Path: "a.json", Size: 3, OID: strings.Repeat("1", 40)},
		{Path: "w/m.safetensors", Size: 1 << 40, OID: strings.Repeat("2", 40), LFS: true, SHA256: strings.Repeat("3", 64), XetHash: "x"},
	}
	data, err := encodeTreeCache(in)
	if err != nil {
		t.Fatal(err)
	}
	// huggingface_hub's layout: sorted paths, one-space indent, its keys.
	want := `{
 "format_version": 1,
 "files": {
  "a.json": {
   "size": 3,
   "blob_id": "1111111111111111111111111111111111111111"
  },
  "w/m.safetensors": {
   "size": 1099511627776,
   "blob_id": "2222222222222222222222222222222222222222",
   "lfs_sha256": "3333333333333333333333333333333333333333333333333333333333333333",
   "lfs_size": 1099511627776,
   "xet_hash": "x"
  }
 }
}
`
	if string(data) != want {
		t.Fatalf("encoded:\n%s", data)
	}
	out, err := ParseTreeCache(data)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	for _, bad := range []string{`{}`, `{"format_version":2,"files":{}}`, `{"format_version":1}`, `[]`,
		`{"format_version":1,"files":{"../x":{"size":1,"blob_id":"` + strings.Repeat("1", 40) + `"}}}`,
		`{"format_version":1,"files":{"x":{"blob_id":"` + strings.Repeat("1", 40) + `"}}}`,
		`{"format_version":1,"files":{"x":{"size":1,"blob_id":"` + strings.Repeat("1", 40) + `","lfs_sha256":"` + strings.Repeat("3", 64) + `"}}}`} {
		if _, err := ParseTreeCache([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

func TestParseRevision(t *testing.T) {
	c := strings.Repeat("c", 40)
	if got, err := ParseRevision([]byte(`{"id":"a/b","sha":"` + c + `","siblings":[{"rfilename":"x"}]}`)); err != nil || got != c {
		t.Fatalf("%q %v", got, err)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"sha":null}`, `{"sha":"abc"}`, `{"sha":"` + strings.ToUpper(c) + `"}`, `{"sha":1}`} {
		if _, err := ParseRevision([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

func TestAPIError(t *testing.T) {
	hdr := func(code, msg string) http.Header {
		h := http.Header{}
		if code != "" {
			h.Set("X-Error-Code", code)
		}
		if msg != "" {
			h.Set("X-Error-Message", msg)
		}
		return h
	}
	cases := []struct {
		name    string
		status  int
		h       http.Header
		file    bool
		want    error
		mention string
	}{
		{"repo 401", 401, hdr("RepoNotFound", "Repository not found"), false, ErrRepoNotFound, "not found"},
		{"repo 404", 404, hdr("RepoNotFound", ""), false, ErrRepoNotFound, "org/name"},
		{"bare 401", 401, hdr("", ""), false, ErrRepoNotFound, "HF_TOKEN"},
		{"invalid credentials", 401, hdr("", msgInvalidCredentials), false, ErrAuth, "refused the token"},
		{"revision", 404, hdr("RevisionNotFound", "Invalid rev id: x"), false, ErrRevisionNotFound, "rev"},
		{"entry", 404, hdr("EntryNotFound", "Entry not found"), true, ErrEntryNotFound, "p/f.bin"},
		{"bare 404 file", 404, hdr("", ""), true, ErrEntryNotFound, "p/f.bin"},
		{"bare 404 api", 404, hdr("", ""), false, ErrRepoNotFound, "org/name"},
		{"gated 401", 401, hdr("GatedRepo", "Access restricted"), true, ErrGated, "https://hub.test/org/name"},
		{"gated 403", 403, hdr("GatedRepo", ""), true, ErrGated, "hf auth login"},
		{"disabled", 403, hdr("", msgDisabled), false, ErrRepoNotFound, "disabled"},
		{"forbidden", 403, hdr("", "nope"), false, ErrAuth, "403"},
		{"server", 503, hdr("", ""), false, ErrNetwork, "503"},
		{"teapot", 418, hdr("Weird", "x\ny"), true, ErrHTTP, "418"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := APIError(c.status, c.h, "https://hub.test", "org/name", "rev", "p/f.bin", c.file)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mention) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestParseContentRange(t *testing.T) {
	cases := []struct {
		in                 string
		first, last, total int64
		ok                 bool
	}{
		{"bytes 0-9/10", 0, 9, 10, true},
		{"bytes 5-5/*", 5, 5, -1, true},
		{" bytes 100-199/1000 ", 100, 199, 1000, true},
		{"bytes 9-0/10", 0, 0, 0, false},
		{"bytes 0-10/10", 0, 0, 0, false},
		{"bytes */10", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
		{"bytes -1-2/3", 0, 0, 0, false},
		{"bytes 0-1/9999999999999999999", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	}
	for _, c := range cases {
		f, l, tot, ok := ParseContentRange(c.in)
		if ok != c.ok || (ok && (f != c.first || l != c.last || tot != c.total)) {
			t.Errorf("%q: %d %d %d %v", c.in, f, l, tot, ok)
		}
	}
}

func TestParsePartName(t *testing.T) {
	base := "abc.incomplete"
	cases := []struct {
		name string
		want int64
		ok   bool
	}{
		{"abc.part-1.incomplete", 1, true},
		{"abc.part-123456789.incomplete", 123456789, true},
		{"abc.part-0.incomplete", 0, false},
		{"abc.part-01.incomplete", 0, false},
		{"abc.part-.incomplete", 0, false},
		{"abc.part-1x.incomplete", 0, false},
		{"abc.part-1", 0, false},
		{"abd.part-1.incomplete", 0, false},
		{"abc.incomplete", 0, false},
		{"abc.part-9999999999999999999.incomplete", 0, false},
	}
	for _, c := range cases {
		if got, ok := ParsePartName(base, c.name); ok != c.ok || got != c.want {
			t.Errorf("%s: %d %v", c.name, got, ok)
		}
	}
	if got, ok := ParsePartName(base, partPath(base, 77)); !ok || got != 77 {
		t.Errorf("partPath does not parse back: %d %v", got, ok)
	}
}

func TestParseLocalMetadata(t *testing.T) {
	c, e := strings.Repeat("a", 40), strings.Repeat("b", 64)
	m, err := ParseLocalMetadata([]byte(c + "\n" + e + "\n1712656091.123\n"))
	if err != nil || m.Commit != c || m.ETag != e || m.Timestamp != 1712656091.123 {
		t.Fatalf("%+v %v", m, err)
	}
	now := time.Unix(1712656091, 500_000_000)
	if m, err := ParseLocalMetadata(formatLocalMetadata(c, e, now)); err != nil || m.Timestamp != 1712656091.5 {
		t.Fatalf("format round trip: %+v %v", m, err)
	}
	for _, bad := range []string{"", c + "\n" + e, c + "\n" + e + "\nnan\n", c + "\nxyz\n1\n", "x\n" + e + "\n1\n", c + "\n" + e + "\n-5\n"} {
		if _, err := ParseLocalMetadata([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestShortHash(t *testing.T) {
	// huggingface_hub: base64.urlsafe_b64encode(hashlib.sha1(b"file.txt.metadata").digest()).decode()
	if got := shortHash("file.txt.metadata"); len(got) != 28 || !strings.HasSuffix(got, "=") || strings.ContainsAny(got, "+/") {
		t.Fatalf("shortHash = %q", got)
	}
}

func TestGitBlobID(t *testing.T) {
	// git hash-object of an empty file and of "hello\n".
	if got := GitBlobID(nil); got != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("empty: %s", got)
	}
	if got := GitBlobID([]byte("hello\n")); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("hello: %s", got)
	}
}

func TestPlanPieces(t *testing.T) {
	const inc = "e.incomplete"
	p := func(start, size int64) partFile {
		return partFile{path: partPath(inc, start), start: start, size: size}
	}
	cases := []struct {
		name      string
		size      int64
		prefix    int64
		parts     []partFile
		partSize  int64
		maxPieces int
		want      []piece
		redundant int
	}{
		{"whole, small", 100, 0, nil, 64, 8, []piece{{inc, 0, 0, 100}}, 0},
		{"done", 100, 100, nil, 64, 8, nil, 0},
		{"empty file", 0, 0, nil, 64, 8, nil, 0},
		{"split", 400, 0, nil, 100, 8, []piece{{inc, 0, 0, 100}, {partPath(inc, 100), 100, 100, 200}, {partPath(inc, 200), 200, 200, 300}, {partPath(inc, 300), 300, 300, 400}}, 0},
		{"split capped", 1000, 0, nil, 100, 2, []piece{{inc, 0, 0, 500}, {partPath(inc, 500), 500, 500, 1000}}, 0},
		{"resume prefix", 100, 30, nil, -1, 8, []piece{{inc, 0, 30, 100}}, 0},
		{"resume parts", 400, 50, []partFile{p(100, 40), p(200, 100)}, 1000, 8,
			[]piece{{inc, 0, 50, 100}, {partPath(inc, 100), 100, 140, 200}, {partPath(inc, 200), 200, 300, 400}}, 0},
		{"covered part", 400, 150, []partFile{p(100, 40), p(120, 100)}, 1000, 8,
			[]piece{{partPath(inc, 120), 120, 220, 400}}, 1},
		{"complete from parts", 300, 100, []partFile{p(100, 200)}, 1000, 8, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, red := planPieces(inc, c.size, c.prefix, c.parts, c.partSize, c.maxPieces)
			if len(got) != len(c.want) || len(red) != c.redundant {
				t.Fatalf("pieces %+v redundant %+v", got, red)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("piece %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestEscape(t *testing.T) {
	if got := escapeSegment("refs/pr/1"); got != "refs%2Fpr%2F1" {
		t.Error(got)
	}
	if got := escapePath("dir with space/a+b#c%.txt"); got != "dir%20with%20space/a%2Bb%23c%25.txt" {
		t.Error(got)
	}
}

func TestTokenFromEnv(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{"HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": "", "HF_HOME": home, "XDG_CACHE_HOME": ""} {
		t.Setenv(k, v)
	}
	if tok, err := TokenFromEnv(); tok != "" || err != nil {
		t.Fatalf("no token: %q %v", tok, err)
	}
	if p := TokenPath(); p != home+"/token" {
		t.Fatalf("TokenPath = %s", p)
	}
	t.Setenv("HF_HOME", "")
	t.Setenv("XDG_CACHE_HOME", home)
	if p := TokenPath(); p != home+"/huggingface/token" {
		t.Fatalf("TokenPath with XDG_CACHE_HOME = %s", p)
	}
	t.Setenv("HF_TOKEN", " hf_x\n")
	if tok, _ := TokenFromEnv(); tok != "hf_x" {
		t.Fatalf("HF_TOKEN: %q", tok)
	}
}

func TestOfflineFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "on": true, "YES": true, "True": true, "false": false, "2": false} {
		t.Setenv("HF_HUB_OFFLINE", v)
		t.Setenv("TRANSFORMERS_OFFLINE", "")
		if OfflineFromEnv() != want {
			t.Errorf("HF_HUB_OFFLINE=%q: %v", v, !want)
		}
	}
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("TRANSFORMERS_OFFLINE", "1")
	if !OfflineFromEnv() {
		t.Error("TRANSFORMERS_OFFLINE ignored")
	}
}

func TestSentinelClasses(t *testing.T) {
	for err, want := range map[error]errclass.Class{
		ErrOptions: errclass.Usage, ErrRepoNotFound: errclass.Usage, ErrRevisionNotFound: errclass.Usage,
		ErrEntryNotFound: errclass.Usage, ErrGated: errclass.Usage, ErrAuth: errclass.Usage,
		ErrNetwork: errclass.IO, ErrHTTP: errclass.IO, ErrDiskFull: errclass.IO,
		ErrCorrupt: errclass.Invalid, ErrProtocol: errclass.Invalid, ErrOffline: errclass.Stale,
	} {
		if got := errclass.Of(err); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}

// pyTranslate is Python's fnmatch.translate (3.12), run through Go's
// regexp, the reference the Glob matcher is held to. ok is false for the
// patterns Python itself cannot compile.
func pyTranslate(pat string) (*regexp.Regexp, bool) {
	rs := []rune(strings.ReplaceAll(pat, `\`, "/"))
	if len(rs) > 0 && rs[len(rs)-1] == '/' {
		rs = append(rs, '*')
	}
	var res strings.Builder
	i, n := 0, len(rs)
	for i < n {
		c := rs[i]
		i++
		switch c {
		case '*':
			for i < n && rs[i] == '*' {
				i++
			}
			res.WriteString(".*")
		case '?':
			res.WriteString(".")
		case '[':
			j := i
			if j < n && rs[j] == '!' {
				j++
			}
			if j < n && rs[j] == ']' {
				j++
			}
			for j < n && rs[j] != ']' {
				j++
			}
			if j >= n {
				res.WriteString(`\[`)
				continue
			}
			var stuff string
			esc := func(s []rune) string {
				return strings.NewReplacer(`\`, `\\`, `-`, `\-`, `[`, `\[`, `]`, `\]`, `^`, `\^`, `&`, `\&`, `~`, `\~`, `|`, `\|`).Replace(string(s))
			}
			if !containsRune(rs[i:j], '-') {
				stuff = esc(rs[i:j])
			} else {
				var chunks [][]rune
				k := i + 1
				if rs[i] == '!' {
					k = i + 2
				}
				for {
					h := -1
					for x := k; x < j; x++ {
						if rs[x] == '-' {
							h = x
							break
						}
					}
					if h < 0 {
						break
					}
					chunks = append(chunks, rs[i:h])
					i = h + 1
					k = h + 3
				}
				if chunk := rs[i:j]; len(chunk) > 0 {
					chunks = append(chunks, chunk)
				} else {
					chunks[len(chunks)-1] = append(append([]rune{}, chunks[len(chunks)-1]...), '-')
				}
				for k := len(chunks) - 1; k > 0; k-- {
					if len(chunks[k-1]) == 0 || len(chunks[k]) == 0 {
						return nil, false // Python raises IndexError
					}
					if chunks[k-1][len(chunks[k-1])-1] > chunks[k][0] {
						chunks[k-1] = append(append([]rune{}, chunks[k-1][:len(chunks[k-1])-1]...), chunks[k][1:]...)
						chunks = append(chunks[:k], chunks[k+1:]...)
					}
				}
				var parts []string
				for _, ch := range chunks {
					parts = append(parts, esc(ch))
				}
				stuff = strings.Join(parts, "-")
			}
			i = j + 1
			switch {
			case stuff == "":
				res.WriteString(`[^\x00-\x{10FFFF}]`) // never matches
			case stuff == "!":
				res.WriteString(".")
			default:
				if stuff[0] == '!' {
					stuff = "^" + stuff[1:]
				}
				res.WriteString("[" + stuff + "]")
			}
		default:
			res.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re, err := regexp.Compile(`(?s)\A(?:` + res.String() + `)\z`)
	return re, err == nil
}

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pat, name string
		want      bool
	}{
		{"*.json", "config.json", true},
		{"*.json", "a/b/config.json", true}, // '*' crosses '/'
		{"*.json", "config.json.bak", false},
		{"config.json", "config.json", true},
		{"config.json", "a/config.json", false},
		{"nested/", "nested/deep/x", true},
		{"nested/", "nested", false},
		{`nested\*`, "nested/x", true}, // '\' is a separator, as in huggingface_hub
		{"?", "/", true},
		{"model-0000?-of-00004.safetensors", "model-00001-of-00004.safetensors", true},
		{"[abc]*", "b", true},
		{"[!abc]*", "b", false},
		{"[!abc]*", "d", true},
		{"[a-c]", "b", true},
		{"[c-a]", "b", false},
		{"[!c-a]", "b", true},
		{"[]]", "]", true},
		{"[!]]", "]", false},
		{"[a-]", "-", true},
		{"[-a]", "-", true},
		{"[a-c-e]", "-", true},
		{"[a-c-e]", "d", false},
		{"[a-c-e]", "e", true},
		{"[", "[", true},
		{"[abc", "[abc", true},
		{"*.[Jj][Ss][Oo][Nn]", "X.JSON", true},
		{"*.JSON", "x.json", false}, // case-sensitive
		{"**", "", true},
		{"", "", true},
		{"", "a", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"é*", "éa", true},
		{"[^a]", "^", true},
	}
	for _, c := range cases {
		if got := CompileGlob(c.pat).Match(c.name); got != c.want {
			t.Errorf("%q ~ %q = %v, want %v", c.pat, c.name, got, c.want)
		}
		if re, ok := pyTranslate(c.pat); ok && re.MatchString(c.name) != c.want {
			t.Errorf("reference disagrees on %q ~ %q", c.pat, c.name)
		}
	}
}

func TestExpandPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DGQ_TEST_X", "/x")
	os.Unsetenv("DGQ_TEST_UNSET")
	for in, want := range map[string]string{
		"~":                       home,
		"~/a/b":                   filepath.Join(home, "a", "b"),
		"$DGQ_TEST_X/t":           "/x/t",
		"${DGQ_TEST_X}/t":         "/x/t",
		"/a/$DGQ_TEST_UNSET/t":    "/a/${DGQ_TEST_UNSET}/t",
		"/plain":                  "/plain",
		"~user/not/expanded/here": "~user/not/expanded/here",
	} {
		if got := expandPath(in); got != want {
			t.Errorf("expandPath(%q) = %q, want %q", in, got, want)
		}
	}
}
