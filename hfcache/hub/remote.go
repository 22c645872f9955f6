package hub

import (
	"context"
	"encoding/json"
	"net/url"
)

// maxPages bounds the pages of one listing.
const maxPages = 100000

// ParseRevision parses the Hub's answer to GET
// /api/models/{repo}/revision/{revision} and returns its "sha", the commit
// the revision points at (40 lower-case hex digits). Errors wrap
// ErrProtocol.
func ParseRevision(data []byte) (string, error) {
	var info struct {
		SHA *string `json:"sha"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return "", failf(ErrProtocol, "revision info is not a JSON object: %v", err)
	}
	if info.SHA == nil {
		return "", failf(ErrProtocol, "revision info has no sha")
	}
	if !isCommit(*info.SHA) {
		return "", failf(ErrProtocol, "revision info: sha %s is not a 40-hex commit", shown(*info.SHA))
	}
	return *info.SHA, nil
}

// resolveRevision asks the Hub which commit revision points at.
func (c *client) resolveRevision(ctx context.Context, revision string) (string, error) {
	u, err := c.url("/api/models/"+c.repo+"/revision/"+escapeSegment(revision), "")
	if err != nil {
		return "", err
	}
	body, _, err := c.getAPI(ctx, u, errContext{repo: c.repo, revision: revision})
	if err != nil {
		return "", err
	}
	sha, err := ParseRevision(body)
	if err != nil {
		return "", failf(err, "%s", describe(c.repo, revision))
	}
	return sha, nil
}

// listTree lists every file of the repo at commit, following the
// pagination of the Link header. A next page must be on the endpoint's
// origin and not seen before.
func (c *client) listTree(ctx context.Context, commit string) ([]Entry, error) {
	u, err := c.url("/api/models/"+c.repo+"/tree/"+escapeSegment(commit), "recursive=true&expand=false")
	if err != nil {
		return nil, err
	}
	ec := errContext{repo: c.repo, revision: commit}
	seen := map[string]bool{}
	var all []Entry
	for page := 0; ; page++ {
		if page >= maxPages {
			return nil, failf(ErrProtocol, "%s: tree listing has more than %d pages", describe(c.repo, commit), maxPages)
		}
		seen[u.String()] = true
		body, h, err := c.getAPI(ctx, u, ec)
		if err != nil {
			return nil, err
		}
		entries, err := ParseTreePage(body)
		if err != nil {
			return nil, failf(err, "%s: page %d", describe(c.repo, commit), page+1)
		}
		all = append(all, entries...)
		if len(all) > maxEntries {
			return nil, failf(ErrProtocol, "%s: tree listing has more than %d files", describe(c.repo, commit), maxEntries)
		}
		next, err := ParseNextLink(h.Values("Link"))
		if err != nil {
			return nil, failf(err, "%s: tree listing", describe(c.repo, commit))
		}
		if next == "" {
			break
		}
		nu, err := url.Parse(next)
		if err != nil {
			return nil, failf(ErrProtocol, "%s: next page %s is not a URL", describe(c.repo, commit), shown(next))
		}
		nu = u.ResolveReference(nu)
		if origin(nu) != origin(c.endpoint) {
			return nil, failf(ErrProtocol, "%s: next page %s is not on %s", describe(c.repo, commit), shown(redactURL(nu)), c.endpoint)
		}
		if seen[nu.String()] {
			return nil, failf(ErrProtocol, "%s: tree listing pages loop at %s", describe(c.repo, commit), shown(redactURL(nu)))
		}
		u = nu
	}
	if err := checkListing(all); err != nil {
		return nil, failf(err, "%s", describe(c.repo, commit))
	}
	return all, nil
}
