package hub

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// oneLineErr fails the test unless err is one line wrapping kind.
func oneLineErr(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) || strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("bad error %q", err)
	}
}

// FuzzParseNextLink: never panics; an error wraps ErrProtocol on one line;
// a target found holds no whitespace or '>' and appears in the input.
func FuzzParseNextLink(f *testing.F) {
	for _, s := range []string{
		`<https://huggingface.co/api/models/a/b/tree/main?recursive=true&cursor=eyJ9>; rel="next"`,
		`<a>; rel="prev", <b>; rel="next"`, `<a>; title="x\"y"; rel=next`, `<a`, `<a>; =x`, `<a>; rel="`, ``,
	} {
		f.Add(s, "")
	}
	f.Add(`<a>; rel="prev"`, `<b>; rel=next`)
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := ParseNextLink([]string{a, b})
		if err != nil {
			oneLineErr(t, err, ErrProtocol)
			return
		}
		if strings.ContainsAny(got, " \t\r\n>") || (got != "" && !strings.Contains(a+b, "<"+got+">")) {
			t.Fatalf("target %q from %q %q", got, a, b)
		}
	})
}

// FuzzParseTreePage: never panics; what it accepts passes the entry rules
// (safe paths, hex digests, sizes in range); errors wrap ErrProtocol.
func FuzzParseTreePage(f *testing.F) {
	sha1, sha256 := strings.Repeat("a", 40), strings.Repeat("b", 64)
	f.Add(`[{"type":"directory","oid":"` + sha1 + `","size":0,"path":"d"},{"type":"file","oid":"` + sha1 + `","size":5,"path":"d/x.json"}]`)
	f.Add(`[{"type":"file","oid":"` + sha1 + `","size":9,"path":"m.bin","lfs":{"oid":"` + sha256 + `","size":9,"pointerSize":130}}]`)
	f.Add(`[{"type":"file","oid":"` + sha1 + `","size":1,"path":"../x"}]`)
	f.Add(`[]`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, doc string) {
		entries, err := ParseTreePage([]byte(doc))
		if err != nil {
			oneLineErr(t, err, ErrProtocol)
			return
		}
		for _, e := range entries {
			if e.validate() != nil || ValidRepoPath(e.Path) != nil || e.Size < 0 || (e.LFS && len(e.ETag()) != 64) || (!e.LFS && len(e.ETag()) != 40) {
				t.Fatalf("accepted a bad entry %+v", e)
			}
			for _, el := range strings.Split(e.Path, "/") {
				if el == ".." || el == "." || el == "" {
					t.Fatalf("accepted path %q", e.Path)
				}
			}
		}
	})
}

// FuzzParseTreeCache: never panics; what it accepts is sorted, valid and
// encodes back to a file that parses to the same entries.
func FuzzParseTreeCache(f *testing.F) {
	good, _ := encodeTreeCache([]Entry{
		{Path: "a.json", Size: 3, OID: strings.Repeat("1", 40)},
		{Path: "w/m.bin", Size: 7, OID: strings.Repeat("2", 40), LFS: true, SHA256: strings.Repeat("3", 64)},
	})
	f.Add(string(good))
	f.Add(`{"format_version":1,"files":{}}`)
	f.Add(`{"format_version":1,"files":{"a":{"size":1,"blob_id":"x"}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		entries, err := ParseTreeCache([]byte(doc))
		if err != nil {
			oneLineErr(t, err, ErrProtocol)
			return
		}
		if !slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
			t.Fatal("not sorted")
		}
		data, err := encodeTreeCache(entries)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseTreeCache(data)
		if err != nil || !slices.Equal(again, entries) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzParseRevision: never panics; an accepted sha is a 40-hex commit.
func FuzzParseRevision(f *testing.F) {
	f.Add(`{"id":"a/b","sha":"` + strings.Repeat("c", 40) + `"}`)
	f.Add(`{"sha":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, doc string) {
		sha, err := ParseRevision([]byte(doc))
		if err != nil {
			oneLineErr(t, err, ErrProtocol)
			return
		}
		if !isCommit(sha) {
			t.Fatalf("accepted sha %q", sha)
		}
	})
}

// FuzzAPIError: whatever the status and error headers, the error is one
// line, wraps exactly the sentinel its rules pick, has that sentinel's
// class, and never quotes more than a bounded part of the message.
func FuzzAPIError(f *testing.F) {
	for _, c := range []struct {
		status    int
		code, msg string
	}{
		{401, "RepoNotFound", "Repository not found"}, {404, "RevisionNotFound", "Invalid rev id: x"},
		{404, "EntryNotFound", "Entry not found"}, {403, "GatedRepo", "Access restricted"}, {401, "", msgInvalidCredentials},
		{403, "", msgDisabled}, {500, "", ""}, {418, "X\n", "a\r\nb"}, {401, "GatedRepo", strings.Repeat("é", 300)},
	} {
		f.Add(c.status, c.code, c.msg, true)
	}
	sentinels := []error{ErrRepoNotFound, ErrRevisionNotFound, ErrEntryNotFound, ErrGated, ErrAuth, ErrNetwork, ErrHTTP}
	f.Fuzz(func(t *testing.T, status int, code, msg string, file bool) {
		h := http.Header{}
		h["X-Error-Code"] = []string{code}
		h["X-Error-Message"] = []string{msg}
		c, m := ParseErrorHeaders(h)
		if len(c) > maxErrorCode || strings.ContainsAny(c, " \r\n\t\x00") {
			t.Fatalf("code %q", c)
		}
		err := APIError(status, h, "https://hub.test", "org/name", "main", "a/b.bin", file)
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 || strings.ContainsAny(err.Error(), "\r\n") || !utf8.ValidString(err.Error()) {
			t.Fatalf("error %q matches %d sentinels", err, n)
		}
		if len(err.Error()) > 1200 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		want := errclass.Usage
		if errors.Is(err, ErrNetwork) || errors.Is(err, ErrHTTP) {
			want = errclass.IO
		}
		if errclass.Of(err) != want {
			t.Fatalf("class %v for %q", errclass.Of(err), err)
		}
		switch {
		case c == CodeGatedRepo && !errors.Is(err, ErrGated):
			t.Fatal("GatedRepo not reported as gated")
		case c == CodeRevisionNotFound && !errors.Is(err, ErrRevisionNotFound):
			t.Fatal("RevisionNotFound not reported")
		case c == CodeEntryNotFound && !errors.Is(err, ErrEntryNotFound):
			t.Fatal("EntryNotFound not reported")
		}
		_ = m
	})
}

// FuzzParseContentRange: never panics; accepted ranges are consistent.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-5/*", "bytes 9-0/10", "bytes */10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, total, ok := ParseContentRange(s)
		if ok && (first < 0 || last < first || (total != -1 && total <= last)) {
			t.Fatalf("%q: %d %d %d", s, first, last, total)
		}
	})
}

// FuzzParsePartName: never panics; accepted names round-trip through
// partPath.
func FuzzParsePartName(f *testing.F) {
	f.Add("e.incomplete", "e.part-12.incomplete")
	f.Add("e.incomplete", "e.part-012.incomplete")
	f.Add("x", "x.part-1.incomplete")
	f.Fuzz(func(t *testing.T, base, name string) {
		start, ok := ParsePartName(base, name)
		if !ok {
			return
		}
		if start <= 0 || partPath(base, start) != name {
			t.Fatalf("%q %q: %d does not round-trip", base, name, start)
		}
	})
}

// FuzzParseLocalMetadata: never panics; accepted metadata is well formed
// and renders back to metadata that parses the same.
func FuzzParseLocalMetadata(f *testing.F) {
	c, e := strings.Repeat("a", 40), strings.Repeat("b", 64)
	f.Add(c + "\n" + e + "\n1712656091.123\n")
	f.Add(c + "\n" + e[:40] + "\n1\n")
	f.Add("\n\n\n")
	f.Fuzz(func(t *testing.T, doc string) {
		m, err := ParseLocalMetadata([]byte(doc))
		if err != nil {
			oneLineErr(t, err, ErrProtocol)
			return
		}
		if !isCommit(m.Commit) || (len(m.ETag) != 40 && len(m.ETag) != 64) || m.Timestamp < 0 {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzGlob: the matcher agrees with Python's fnmatch.translate (the
// reference pyTranslate) on every pattern Python can compile.
func FuzzGlob(f *testing.F) {
	for _, c := range [][2]string{
		{"*.json", "a/b.json"}, {"[a-c-e]", "-"}, {"[!]]x", "ax"}, {"[z-a]", "b"}, {"nested/", "nested/x"},
		{"[!-a]", "-"}, {"[a--]", "-"}, {"a[", "a["}, {"*a*b?c[de]", "xaybzcd"}, {"[]-a]", "^"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pat, name string) {
		if len(pat) > 64 || len(name) > 64 || !utf8.ValidString(pat) || !utf8.ValidString(name) {
			return
		}
		got := CompileGlob(pat).Match(name)
		re, ok := pyTranslate(pat)
		if !ok {
			return
		}
		if want := re.MatchString(name); got != want {
			t.Fatalf("%q ~ %q: %v, Python's fnmatch says %v", pat, name, got, want)
		}
	})
}

// FuzzPlanPieces: whatever the partial files on disk, the plan fetches
// every missing byte exactly once: the pieces do not overlap, start where
// their file ends, and with the bytes present cover the whole content.
func FuzzPlanPieces(f *testing.F) {
	f.Add(int64(1000), int64(10), "100:50,400:0,450:100", int64(100), 4)
	f.Add(int64(1<<20), int64(0), "", int64(64<<10), 8)
	f.Add(int64(50), int64(50), "10:5", int64(-1), 1)
	f.Fuzz(func(t *testing.T, size, prefix int64, spec string, partSize int64, maxPieces int) {
		if size < 0 || size > 1<<40 || prefix < 0 || prefix > size || maxPieces > 64 || (partSize > 0 && size/partSize > 4096) {
			return
		}
		const inc = "e.incomplete"
		var parts []partFile
		seen := map[int64]bool{}
		for _, p := range strings.Split(spec, ",") {
			a, b, ok := strings.Cut(p, ":")
			start, err1 := strconv.ParseInt(a, 10, 64)
			n, err2 := strconv.ParseInt(b, 10, 64)
			if !ok || err1 != nil || err2 != nil || start <= 0 || start >= size || n < 0 || n > size-start || seen[start] {
				continue
			}
			seen[start] = true
			parts = append(parts, partFile{path: partPath(inc, start), start: start, size: n})
		}
		slices.SortFunc(parts, func(a, b partFile) int { return int(min(max(a.start-b.start, -1), 1)) })
		pieces, redundant := planPieces(inc, size, prefix, parts, partSize, maxPieces)
		ends := map[string]int64{inc: prefix}
		starts := map[string]int64{inc: 0}
		for _, p := range parts {
			if !slices.Contains(redundant, p) {
				ends[p.path], starts[p.path] = p.start+p.size, p.start
			}
		}
		// Coverage as intervals: what is present (kept files) plus pieces.
		type iv struct{ a, b int64 }
		var ivs []iv
		for path, end := range ends {
			ivs = append(ivs, iv{starts[path], end})
		}
		var last int64 = -1
		for _, p := range pieces {
			if p.from >= p.to || p.from < last {
				t.Fatalf("pieces out of order or empty: %+v", pieces)
			}
			last = p.to
			if e, ok := ends[p.file]; ok {
				if e != p.from || starts[p.file] != p.fileStart {
					t.Fatalf("piece %+v does not start where its file ends (%d)", p, e)
				}
			} else if p.fileStart != p.from || p.file != partPath(inc, p.from) {
				t.Fatalf("new part %+v misnamed", p)
			}
			ends[p.file] = p.to
			ivs = append(ivs, iv{p.from, p.to})
		}
		slices.SortFunc(ivs, func(x, y iv) int { return int(min(max(x.a-y.a, -1), 1)) })
		var frontier int64
		for _, v := range ivs {
			if v.a > frontier {
				t.Fatalf("bytes %d..%d never fetched (pieces %+v, parts %+v)", frontier, v.a, pieces, parts)
			}
			frontier = max(frontier, v.b)
		}
		if frontier != size {
			t.Fatalf("coverage ends at %d of %d", frontier, size)
		}
		// Nothing present is fetched again.
		for _, p := range pieces {
			for _, q := range parts {
				if slices.Contains(redundant, q) {
					continue
				}
				if p.from < q.start+q.size && q.start < p.to {
					t.Fatalf("piece %+v refetches part %+v", p, q)
				}
			}
			if p.from < prefix {
				t.Fatalf("piece %+v refetches the prefix", p)
			}
		}
	})
}
