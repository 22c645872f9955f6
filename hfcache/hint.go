package hfcache

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// DownloadHint renders the fix command for a repo, revision and missing
// files: "dgq download ORG/NAME --revision REV" plus " --include F" per
// missing file (sorted, duplicates and empty names dropped). An empty
// revision stands for "main". Words a shell would split or expand are
// single-quoted; the result is always one line.
func DownloadHint(repo, revision string, missing ...string) string {
	if revision == "" {
		revision = DefaultRevision
	}
	var b strings.Builder
	b.WriteString("dgq download ")
	b.WriteString(shellWord(repo))
	b.WriteString(" --revision ")
	b.WriteString(shellWord(revision))
	files := slices.Clone(missing)
	slices.Sort(files)
	for i, f := range files {
		if f == "" || (i > 0 && f == files[i-1]) {
			continue
		}
		b.WriteString(" --include ")
		b.WriteString(shellWord(f))
	}
	return b.String()
}

// shellWord returns s as one shell word: bare when it holds only characters
// no shell treats specially, single-quoted otherwise, and Go-quoted (not
// shell syntax, but one line) when it holds characters that are not
// printable.
func shellWord(s string) string {
	if s == "" {
		return "''"
	}
	plain := true
	for _, r := range s {
		switch {
		case !unicode.IsPrint(r):
			return strconv.Quote(s)
		case r < 0x80 && (r == '_' || r == '-' || r == '.' || r == '/' || r == '+' || r == ',' || r == ':' || r == '=' || r == '@' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')):
		default:
			plain = false
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// HintFor renders the fix command for files missing from this snapshot,
// pinned to its commit (so that the files land in the same snapshot even if
// the branch has moved since). It returns "" for a folder outside any hub
// cache (Repo empty).
func (r Resolved) HintFor(missing ...string) string {
	if r.Repo == "" {
		return ""
	}
	rev := r.Revision
	if rev == "" {
		rev = r.Ref
	}
	return DownloadHint(r.Repo, rev, missing...)
}

// fixFor returns "; fix: dgq download …" for a path Detect recognizes (a
// snapshot folder, or a file in one, which is then named with --include),
// and "" for any other path.
func fixFor(p string) string {
	_, repo, rev, rel, ok := detect(p)
	if !ok {
		return ""
	}
	if rel == "" {
		return "; fix: " + DownloadHint(repo, rev)
	}
	return "; fix: " + DownloadHint(repo, rev, rel)
}

// StaleError reports a pinned external file (for example a source shard a
// layered pack refers to) that is missing or has changed. It unwraps to
// ErrStale.
type StaleError struct {
	// Path is the file.
	Path string
	// What says what is wrong ("missing", "size 12 differs from the
	// pinned 10" …), one line.
	What string
	// Hint is the fix, usually from DownloadHint or Resolved.HintFor; it
	// may be empty.
	Hint string
}

// Error returns "hfcache: <path>: <what>; fix: <hint>" (without the fix
// part when Hint is empty), on one line.
func (e *StaleError) Error() string {
	msg := "hfcache: " + display(e.Path) + ": " + display(e.What)
	if e.Hint != "" {
		msg += "; fix: " + display(e.Hint)
	}
	return msg
}

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }
