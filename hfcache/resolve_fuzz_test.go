package hfcache

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseRepoRef: ParseRepoRef, Detect and DownloadHint never panic;
// what ParseRepoRef accepts round-trips through String, has a repo id of
// exactly org/name and a revision that stays inside refs/; what Detect
// accepts is a valid repo id and a 40-hex commit; hints are one line.
func FuzzParseRepoRef(f *testing.F) {
	const hex = "908e7097997c140d18cca0ed34c0edf38e091034"
	for _, s := range []string{
		"org/name", "org/name@main", "org/name@" + hex, "org/name@refs/pr/1", "./x", "/abs", "a/b/c", "/org", "org/",
		"org/name@../../etc", "org/name@", "models--a--b/snapshots/" + hex,
		"/c/hub/models--org--name/snapshots/" + hex + "/config.json", "/x/models--a--b--c/snapshots/" + hex,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, ok := ParseRepoRef(s); ok {
			if r.String() != s {
				t.Fatalf("%q round-trips to %q", s, r.String())
			}
			if strings.Count(r.Repo, "/") != 1 || !validRepoID(r.Repo) {
				t.Fatalf("%q: repo %q", s, r.Repo)
			}
			rev := r.rev()
			if !filepath.IsLocal(filepath.FromSlash(rev)) || strings.ContainsAny(rev, "\\\x00 \n") {
				t.Fatalf("%q: revision %q escapes refs/", s, rev)
			}
			if r2, ok := ParseRepoRef(r.String()); !ok || r2 != r {
				t.Fatalf("%q: reparse %+v %v", s, r2, ok)
			}
		}
		if repo, rev, ok := Detect(s); ok {
			if !validRepoID(repo) || !isCommit(rev) {
				t.Fatalf("Detect(%q) = %q, %q", s, repo, rev)
			}
		}
		h := DownloadHint(s, s, s, "")
		if strings.ContainsAny(h, "\n\r") || !strings.HasPrefix(h, "dgq download ") {
			t.Fatalf("hint %q", h)
		}
	})
}
