package hub

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/internal/errclass"
)

// Sentinel errors. Every error Download returns wraps one of them (or
// context.Canceled when it was interrupted); callers test them with
// errors.Is, and errclass.Of gives their class.
var (
	// ErrOptions: the request itself is wrong: a malformed repo id or
	// revision, a revision given twice, a bad endpoint URL, a --local-dir
	// inside the hub cache. It also matches hfcache.ErrRepoRef.
	ErrOptions = errclass.Wrap(errclass.Usage, "hub: invalid download request", hfcache.ErrRepoRef)
	// ErrRepoNotFound: the Hub has no such repository (or it is private
	// and no valid token was sent).
	ErrRepoNotFound = errclass.New(errclass.Usage, "hub: repository not found")
	// ErrRevisionNotFound: the repository has no such branch, tag or
	// commit.
	ErrRevisionNotFound = errclass.New(errclass.Usage, "hub: revision not found")
	// ErrEntryNotFound: a file the download needs is not in the repository
	// at that revision, or no file matches --include/--exclude.
	ErrEntryNotFound = errclass.New(errclass.Usage, "hub: file not found")
	// ErrGated: the repository is gated: its licence must be accepted on
	// its page and the request authenticated.
	ErrGated = errclass.New(errclass.Usage, "hub: gated repository")
	// ErrAuth: the Hub refused the token (invalid, or without the
	// permission the repository needs).
	ErrAuth = errclass.New(errclass.Usage, "hub: access denied")
	// ErrNetwork: the Hub could not be reached, or kept failing (network
	// errors, 5xx, 429, truncated bodies) after every retry.
	ErrNetwork = errclass.New(errclass.IO, "hub: network failure")
	// ErrHTTP: the Hub gave an answer dgq cannot use (an unexpected status).
	ErrHTTP = errclass.New(errclass.IO, "hub: unexpected HTTP response")
	// ErrDiskFull: not enough free space for what is left to fetch, or the
	// disk filled up while writing.
	ErrDiskFull = errclass.New(errclass.IO, "hub: not enough disk space")
	// ErrCorrupt: downloaded bytes do not match the size and digest the Hub
	// lists for the file; nothing of that file is published.
	ErrCorrupt = errclass.New(errclass.Invalid, "hub: corrupt download")
	// ErrProtocol: an answer of the Hub is malformed (JSON, Link header, a
	// file path that would leave the snapshot folder, a digest that is not
	// hex).
	ErrProtocol = errclass.New(errclass.Invalid, "hub: malformed answer from the Hub")
	// ErrOffline: HF_HUB_OFFLINE is set and the cache does not hold the
	// complete snapshot asked for.
	ErrOffline = errclass.New(errclass.Stale, "hub: offline and not in the cache")
)

// failf builds "<kind>: <detail>", detail made one line.
func failf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, oneLine(fmt.Sprintf(format, args...)))
}

// maxShown bounds a server-controlled string quoted in a message.
const maxShown = 200

// oneLine folds s onto one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(strings.NewReplacer("\r", " ", "\n", "; ").Replace(s)), " ")
}

// shown renders a string the server (or a repo) controls for a message:
// bare when it is non-empty printable text, else Go-quoted; always one line
// and at most maxShown bytes of s.
func shown(s string) string {
	clipped := false
	if len(s) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s, clipped = s[:cut], true
	}
	plain := s != "" && utf8.ValidString(s)
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '"' || r == '\\' {
			plain = false
			break
		}
	}
	if !plain {
		s = strconv.Quote(s)
	}
	if clipped {
		s += "…"
	}
	return s
}
