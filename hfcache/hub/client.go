package hub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// userAgent identifies dgq to the Hub.
const userAgent = "dgq-download (+https://github.com/dgq-dev/dgq)"

// maxAPIBody bounds a JSON answer of the Hub (a revision, a listing page).
const maxAPIBody = 64 << 20

// client talks to one Hub endpoint: the token goes to that origin only,
// requests are retried with backoff, answers are mapped to the sentinels.
type client struct {
	hc       *http.Client
	endpoint *url.URL
	repo     string
	policy   retryPolicy
}

// newClient builds the HTTP client. base is the transport (nil: a clone of
// http.DefaultTransport restricted to HTTP/1.1, so that parallel transfers
// use separate connections).
func newClient(endpoint *url.URL, token, repo string, base http.RoundTripper, policy retryPolicy, conns int) *client {
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ForceAttemptHTTP2 = false
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		t.MaxIdleConnsPerHost = max(conns, 2)
		t.DisableCompression = true
		base = t
	}
	return &client{
		hc:       &http.Client{Transport: &authTransport{base: base, origin: origin(endpoint), token: token}},
		endpoint: endpoint,
		repo:     repo,
		policy:   policy,
	}
}

// authTransport adds "Authorization: Bearer <token>" to requests for the
// endpoint's origin (scheme, host and port) only, and strips it from any
// other: a redirect to a CDN host never carries the token.
type authTransport struct {
	base   http.RoundTripper
	origin string
	token  string
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	same := origin(req.URL) == t.origin
	switch {
	case same && t.token != "":
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.token)
	case !same && req.Header.Get("Authorization") != "":
		req = req.Clone(req.Context())
		req.Header.Del("Authorization")
	}
	return t.base.RoundTrip(req)
}

// origin is "scheme://host:port" of u, lower-cased, with the default port
// made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme + "://" + u.Hostname() + ":" + port)
}

// url builds an endpoint URL from already escaped path elements.
func (c *client) url(escapedPath string, query string) (*url.URL, error) {
	raw := strings.TrimRight(c.endpoint.String(), "/") + escapedPath
	if query != "" {
		raw += "?" + query
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, failf(ErrOptions, "cannot build a Hub URL: %v", err)
	}
	return u, nil
}

// escapeSegment escapes s for one URL path element as Python's
// urllib.parse.quote(s, safe="") does: everything but letters, digits and
// "_.-~" is percent-encoded.
func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// escapePath escapes a '/'-separated repo path element by element.
func escapePath(p string) string {
	els := strings.Split(p, "/")
	for i, el := range els {
		els[i] = escapeSegment(el)
	}
	return strings.Join(els, "/")
}

// retryPolicy says how often and how long to retry.
type retryPolicy struct {
	retries int           // retries after the first attempt without progress
	wait    time.Duration // first backoff, doubled each time
	maxWait time.Duration // backoff cap
	stall   time.Duration // no byte for this long fails the attempt
}

// maxRetryAfter caps how long a server's Retry-After is honoured.
const maxRetryAfter = 5 * time.Minute

// sleep waits the backoff of the n-th retry (1-based), or retryAfter when
// the server asked for it, until ctx is done.
func (p retryPolicy) sleep(ctx context.Context, n int, retryAfter time.Duration) error {
	d := p.wait
	for i := 1; i < n && d < p.maxWait; i++ {
		d *= 2
	}
	d = min(d, p.maxWait)
	if retryAfter > 0 {
		d = min(retryAfter, maxRetryAfter)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable is a failure worth another attempt: a network error, a stall,
// a truncated body, or a status the Hub uses for transient trouble.
type retryable struct {
	err        error
	retryAfter time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// retryableStatus reports whether an HTTP status is transient.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// permanentNetError reports a transport error that retrying cannot fix
// (a certificate the system does not trust).
func permanentNetError(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var cv *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &cv)
}

// parseRetryAfter reads a Retry-After header in seconds (dates are
// ignored), 0 when absent or malformed.
func parseRetryAfter(h http.Header) time.Duration {
	s := strings.TrimSpace(h.Get("Retry-After"))
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// stallWatch cancels an attempt when no byte arrives for the policy's
// stall time; Touch re-arms it.
type stallWatch struct {
	timer   *time.Timer
	d       time.Duration
	stalled atomic.Bool
}

// watch derives an attempt context from ctx that a stall cancels.
func (p retryPolicy) watch(ctx context.Context) (context.Context, *stallWatch, context.CancelFunc) {
	actx, cancel := context.WithCancel(ctx)
	w := &stallWatch{d: p.stall}
	w.timer = time.AfterFunc(p.stall, func() {
		w.stalled.Store(true)
		cancel()
	})
	return actx, w, func() {
		w.timer.Stop()
		cancel()
	}
}

// Touch re-arms the stall timer after progress.
func (w *stallWatch) Touch() { w.timer.Reset(w.d) }

// attemptErr turns the error of one attempt into what the retry loop
// acts on: ctx's own error when the caller canceled, a retryable error for
// a stall or a network failure, the error itself otherwise.
func attemptErr(ctx context.Context, w *stallWatch, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if w.stalled.Load() {
		return &retryable{err: fmt.Errorf("no data for %s", w.d)}
	}
	var r *retryable
	if errors.As(err, &r) {
		return err
	}
	if permanentNetError(err) {
		return failf(ErrNetwork, "%v", err)
	}
	return &retryable{err: err}
}

// errContext says what a request was about, for error messages.
type errContext struct {
	repo, revision, path string
	file                 bool // a file download (a 404 without a code is a missing file)
}

// getAPI GETs a JSON document of the Hub with retries and returns its body
// and headers; a non-2xx answer becomes the matching sentinel error.
func (c *client) getAPI(ctx context.Context, u *url.URL, ec errContext) ([]byte, http.Header, error) {
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			var ra time.Duration
			var r *retryable
			if errors.As(last, &r) {
				ra = r.retryAfter
			}
			if err := c.policy.sleep(ctx, attempt, ra); err != nil {
				return nil, nil, err
			}
		}
		body, h, err := c.getAPIOnce(ctx, u, ec)
		if err == nil {
			return body, h, nil
		}
		var r *retryable
		if !errors.As(err, &r) {
			return nil, nil, err
		}
		last = err
		if attempt >= c.policy.retries {
			return nil, nil, failf(ErrNetwork, "%s: %s: gave up after %d attempts: %v", c.repo, redactURL(u), attempt+1, err)
		}
	}
}

// getAPIOnce is one attempt of getAPI.
func (c *client) getAPIOnce(ctx context.Context, u *url.URL, ec errContext) ([]byte, http.Header, error) {
	actx, w, stop := c.policy.watch(ctx)
	defer stop()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, failf(ErrOptions, "%v", err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, attemptErr(ctx, w, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, c.statusError(resp, ec)
	}
	body, err := io.ReadAll(&touchReader{r: io.LimitReader(resp.Body, maxAPIBody+1), w: w})
	if err != nil {
		return nil, nil, attemptErr(ctx, w, err)
	}
	if len(body) > maxAPIBody {
		return nil, nil, failf(ErrProtocol, "%s: answer larger than %d bytes", redactURL(u), maxAPIBody)
	}
	return body, resp.Header, nil
}

// touchReader re-arms a stall watch on every read that returns data.
type touchReader struct {
	r io.Reader
	w *stallWatch
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.w.Touch()
	}
	return n, err
}

// statusError maps a non-2xx response to an error: retryable for a
// transient status, a sentinel error otherwise (APIError).
func (c *client) statusError(resp *http.Response, ec errContext) error {
	if retryableStatus(resp.StatusCode) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return &retryable{err: fmt.Errorf("HTTP %d from %s", resp.StatusCode, redactURL(resp.Request.URL)), retryAfter: parseRetryAfter(resp.Header)}
	}
	return APIError(resp.StatusCode, resp.Header, c.endpoint.String(), ec.repo, ec.revision, ec.path, ec.file)
}

// redactURL renders a URL for a message without its query (a CDN's
// signed URL carries credentials there).
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	v.RawQuery, v.ForceQuery, v.Fragment, v.User = "", false, "", nil
	return v.String()
}
