package hub

import (
	"fmt"
	"net/http"
	"strings"
)

// The X-Error-Code values of the Hub that the download tells apart.
const (
	CodeRepoNotFound     = "RepoNotFound"
	CodeRevisionNotFound = "RevisionNotFound"
	CodeEntryNotFound    = "EntryNotFound"
	CodeGatedRepo        = "GatedRepo"
)

// Messages the Hub sends in X-Error-Message that change the meaning of a
// status (as huggingface_hub reads them).
const (
	msgInvalidCredentials = "Invalid credentials in Authorization header"
	msgDisabled           = "Access to this resource is disabled."
)

// maxErrorCode bounds an X-Error-Code value; longer ones are ignored.
const maxErrorCode = 64

// ParseErrorHeaders reads the Hub's error headers: X-Error-Code (returned
// only when it is a short token of letters, digits, '_' and '-', else "")
// and X-Error-Message (spaces trimmed; kept as sent, for exact comparison;
// render it with care, it is server-controlled).
func ParseErrorHeaders(h http.Header) (code, message string) {
	code = strings.TrimSpace(h.Get("X-Error-Code"))
	if len(code) > maxErrorCode {
		code = ""
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			code = ""
			break
		}
	}
	return code, strings.TrimSpace(h.Get("X-Error-Message"))
}

// APIError maps a failed answer of the Hub (status and headers) to a
// one-line error wrapping the matching sentinel, as huggingface_hub's
// hf_raise_for_status reads them:
//
//   - X-Error-Code RevisionNotFound: ErrRevisionNotFound;
//   - EntryNotFound (or a 404 without a code for a file): ErrEntryNotFound;
//   - GatedRepo: ErrGated, telling to accept the licence on the repo's page
//     and to set HF_TOKEN or run `hf auth login`;
//   - RepoNotFound, a 404 without a code for an API call, or a 401 other
//     than for invalid credentials (the Hub answers 401 for a repo that
//     does not exist or is private): ErrRepoNotFound;
//   - a disabled repo: ErrRepoNotFound;
//   - a 401 for invalid credentials, or a 403: ErrAuth;
//   - a transient status (408, 429, 5xx): ErrNetwork;
//   - anything else: ErrHTTP.
//
// endpoint, repo, revision and path only fill in the message. The token is
// never part of it.
func APIError(status int, h http.Header, endpoint, repo, revision, path string, file bool) error {
	code, msg := ParseErrorHeaders(h)
	detail := ""
	if msg != "" {
		detail = " (the Hub says: " + shown(msg) + ")"
	}
	page := strings.TrimRight(endpoint, "/") + "/" + repo
	login := "set HF_TOKEN or log in with `hf auth login`"
	switch {
	case code == CodeRevisionNotFound:
		return failf(ErrRevisionNotFound, "%s has no revision %s on %s%s", repo, shown(revision), endpoint, detail)
	case code == CodeEntryNotFound || (code == "" && status == http.StatusNotFound && file):
		return failf(ErrEntryNotFound, "%s@%s has no file %s%s", repo, shown(revision), shown(path), detail)
	case code == CodeGatedRepo:
		return failf(ErrGated, "%s is gated: accept its licence on %s, then %s (HTTP %d)%s", repo, page, login, status, detail)
	case msg == msgDisabled:
		return failf(ErrRepoNotFound, "%s is disabled on %s%s", repo, endpoint, detail)
	case code == CodeRepoNotFound || (code == "" && status == http.StatusNotFound) ||
		(status == http.StatusUnauthorized && msg != msgInvalidCredentials):
		return failf(ErrRepoNotFound, "repository %s not found on %s (if it is private or gated, %s)%s", repo, endpoint, login, detail)
	case status == http.StatusUnauthorized:
		return failf(ErrAuth, "the Hub refused the token (invalid credentials): %s%s", login, detail)
	case status == http.StatusForbidden:
		return failf(ErrAuth, "access to %s denied (HTTP 403): make sure your token has the permissions it needs%s", repo, detail)
	case retryableStatus(status):
		return failf(ErrNetwork, "%s: HTTP %d%s", repo, status, detail)
	}
	what := repo
	if path != "" {
		what += ": " + shown(path)
	}
	return failf(ErrHTTP, "%s: HTTP %d %s%s", what, status, http.StatusText(status), detail)
}

// describe renders "repo@revision" for messages.
func describe(repo, revision string) string {
	return fmt.Sprintf("%s@%s", repo, revision)
}
