package hub

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// A file's bytes arrive in <name>.incomplete, huggingface_hub's partial
// file: always a contiguous prefix of the content, which huggingface_hub
// (the versions that resume) and dgq both resume with a Range request. A
// large file is also fetched in ranged parts at once; the parts beyond the
// prefix land in their own files beside it,
//
//	<name>.part-<start>.incomplete
//
// each a contiguous run of the content from byte <start> on. The names and
// sizes of these files are the record of what has arrived: a crash leaves
// nothing to reconcile, a rerun resumes every part where it stopped. When
// every range is in, the parts are appended to the prefix in order (each
// part deleted once appended), the whole is checked against the size and
// digest the Hub lists, and only then renamed into place. huggingface_hub
// counts the part files as orphaned partial downloads (its cache cleaning
// removes them) and never reads them as its own.

// copyBuf is the buffer size of transfers.
const copyBuf = 256 << 10

// partFile is a part file found on disk: content [start, start+size).
type partFile struct {
	path        string
	start, size int64
}

// partPath names the part file of incomplete that starts at start.
func partPath(incomplete string, start int64) string {
	return strings.TrimSuffix(incomplete, ".incomplete") + ".part-" + strconv.FormatInt(start, 10) + ".incomplete"
}

// ParsePartName reads the start offset from the name of a part file of
// the partial file named base (for example "<etag>.incomplete"): the name
// must be base without ".incomplete", then ".part-", a decimal offset
// greater than zero without leading zeros, and ".incomplete".
func ParsePartName(base, name string) (int64, bool) {
	stem, ok := strings.CutSuffix(base, ".incomplete")
	if !ok {
		return 0, false
	}
	rest, ok := strings.CutPrefix(name, stem+".part-")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".incomplete")
	if !ok || digits == "" || len(digits) > 18 || digits[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}

// blobTask brings one file content into dest.
type blobTask struct {
	entry      Entry
	dest       string // the verified file: blobs/<etag>, or DIR/<path>
	incomplete string
	lock       string
	copyFrom   string   // a local file with the content (a cache blob, for --local-dir)
	pointers   []string // cache mode: snapshot entries to link to dest
	localPath  string   // --local-dir mode: the repo path, for the metadata

	fetched atomic.Int64
	resumed bool
}

// scanPartial returns the size of the prefix file and the part files of a
// task, removing leftovers that cannot belong to the content (a prefix or
// part running past its end).
func scanPartial(t *blobTask) (int64, []partFile, error) {
	size := t.entry.Size
	var prefix int64
	if fi, err := os.Lstat(t.incomplete); err == nil {
		if !fi.Mode().IsRegular() || fi.Size() > size {
			if err := os.Remove(t.incomplete); err != nil {
				return 0, nil, fmt.Errorf("hub: %w", err)
			}
		} else {
			prefix = fi.Size()
		}
	}
	dir := filepath.Dir(t.incomplete)
	des, err := os.ReadDir(dir)
	if err != nil && !isNotExist(err) {
		return 0, nil, fmt.Errorf("hub: %w", err)
	}
	var parts []partFile
	base := filepath.Base(t.incomplete)
	for _, de := range des {
		start, ok := ParsePartName(base, de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, de.Name())
		fi, err := de.Info()
		if err != nil {
			continue
		}
		if start >= size || fi.Size() > size-start {
			if err := os.Remove(p); err != nil {
				return 0, nil, fmt.Errorf("hub: %w", err)
			}
			continue
		}
		parts = append(parts, partFile{path: p, start: start, size: fi.Size()})
	}
	slices.SortFunc(parts, func(a, b partFile) int { return cmp.Compare(a.start, b.start) })
	return prefix, parts, nil
}

// piece is one range to fetch, appended to file, whose content starts at
// fileStart: the range [from, to).
type piece struct {
	file      string
	fileStart int64
	from, to  int64
}

// planPieces covers what is missing of a content of size bytes, given the
// prefix and part files on disk: each gap is appended to the file that
// ends where it begins; a gap of at least two partSize is split into
// ranges of at least partSize (at most maxPieces), the ranges after the
// first going to new part files. Parts wholly inside what is already
// covered are returned as redundant.
func planPieces(incomplete string, size, prefix int64, parts []partFile, partSize int64, maxPieces int) (pieces []piece, redundant []partFile) {
	type iv struct {
		file       string
		start, end int64
	}
	owner := iv{incomplete, 0, prefix}
	frontier := prefix
	var gaps []struct {
		owner    iv
		from, to int64
	}
	addGap := func(o iv, from, to int64) {
		gaps = append(gaps, struct {
			owner    iv
			from, to int64
		}{o, from, to})
	}
	for _, p := range parts { // sorted by start
		start, end := p.start, p.start+p.size
		switch {
		case start > frontier:
			addGap(owner, frontier, start)
		case end <= frontier:
			redundant = append(redundant, p) // wholly covered already
			continue
		}
		owner, frontier = iv{p.path, start, end}, end
	}
	if frontier < size {
		addGap(owner, frontier, size)
	}
	for _, g := range gaps {
		n := int64(1)
		if partSize > 0 && g.to-g.from >= 2*partSize {
			n = min((g.to-g.from)/partSize, int64(max(maxPieces, 1)))
		}
		step := (g.to - g.from + n - 1) / n
		for k := int64(0); k < n; k++ {
			from := g.from + k*step
			to := min(from+step, g.to)
			if from >= to {
				break
			}
			if k == 0 {
				pieces = append(pieces, piece{file: g.owner.file, fileStart: g.owner.start, from: from, to: to})
			} else {
				pieces = append(pieces, piece{file: partPath(incomplete, from), fileStart: from, from: from, to: to})
			}
		}
	}
	return pieces, redundant
}

// ParseContentRange parses a Content-Range header of a 206 answer,
// "bytes first-last/total" (total "*" when unknown, returned as -1).
func ParseContentRange(s string) (first, last, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, 0, false
	}
	first, err1 := parseNonNeg(a)
	last, err2 := parseNonNeg(b)
	if err1 != nil || err2 != nil || last < first {
		return 0, 0, 0, false
	}
	total = -1
	if tot != "*" {
		t, err := parseNonNeg(tot)
		if err != nil || t <= last {
			return 0, 0, 0, false
		}
		total = t
	}
	return first, last, total, true
}

// parseNonNeg parses a non-negative decimal of at most 18 digits.
func parseNonNeg(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, errorString("bad number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errorString("bad number")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// fetchTask fetches the missing ranges of a task's content concurrently
// (each range holding a connection slot), then merges, verifies and
// renames it into place.
func (d *downloader) fetchTask(ctx context.Context, t *blobTask) error {
	prefix, parts, err := scanPartial(t)
	if err != nil {
		return err
	}
	t.resumed = prefix > 0 || len(parts) > 0
	pieces, redundant := planPieces(t.incomplete, t.entry.Size, prefix, parts, d.partSize, d.conns)
	for _, p := range redundant {
		_ = os.Remove(p.path)
	}
	if err := mkdirAll(filepath.Dir(t.incomplete)); err != nil {
		return err
	}
	g, pctx := errgroup.WithContext(ctx)
	for _, p := range pieces {
		g.Go(func() error { return d.withConn(pctx, func() error { return d.fetchPiece(pctx, t, p) }) })
	}
	firstErr := g.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if firstErr != nil {
		if errors.Is(firstErr, ErrCorrupt) {
			removePartial(t)
		}
		return firstErr
	}
	return d.finishTask(ctx, t)
}

// withConn runs f holding one of the connection slots.
func (d *downloader) withConn(ctx context.Context, f func() error) error {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.slots }()
	return f()
}

// fetchPiece appends [from, to) of the content to the piece's file,
// retrying (and resuming with Range) until done or out of retries.
func (d *downloader) fetchPiece(ctx context.Context, t *blobTask, p piece) error {
	f, err := os.OpenFile(p.file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	pos := p.fileStart + fi.Size()
	if pos > p.to || pos < p.from {
		return fmt.Errorf("hub: %s: %s holds %d bytes from %d, the plan wanted %d (another process wrote it?)", t.entry.Path, p.file, fi.Size(), p.fileStart, p.from-p.fileStart)
	}
	failures := 0
	var last error
	for pos < p.to {
		n, err := d.getRange(ctx, t, f, pos, p.to)
		pos += n
		if err == nil && n == 0 && pos < p.to {
			err = &retryable{err: errorString("the answer ended before the range")}
		}
		if err == nil {
			continue
		}
		var r *retryable
		if !errors.As(err, &r) {
			return err
		}
		if n > 0 {
			failures = 0
		}
		failures++
		last = err
		if failures > d.c.policy.retries {
			return failf(ErrNetwork, "%s: %s: gave up after %d attempts without progress: %v", describe(d.repo, d.commit), t.entry.Path, failures, last)
		}
		if err := d.c.policy.sleep(ctx, failures, r.retryAfter); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("hub: %s: %w", p.file, diskErr(err))
	}
	return nil
}

// resolveURL is the URL of a file's bytes at the commit.
func (d *downloader) resolveURL(path string) (string, error) {
	u, err := d.c.url("/"+d.repo+"/resolve/"+escapeSegment(d.commit)+"/"+escapePath(path), "")
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// getRange makes one GET for [pos, to) of the content and appends what
// arrives to f. It returns the bytes appended and an error: retryable for
// a transient failure, a sentinel otherwise.
func (d *downloader) getRange(ctx context.Context, t *blobTask, f *os.File, pos, to int64) (int64, error) {
	size := t.entry.Size
	raw, err := d.resolveURL(t.entry.Path)
	if err != nil {
		return 0, err
	}
	actx, w, stop := d.c.policy.watch(ctx)
	defer stop()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, raw, nil)
	if err != nil {
		return 0, failf(ErrOptions, "%v", err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept-Encoding", "identity")
	ranged := pos > 0 || to < size
	if ranged {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(pos, 10)+"-"+strconv.FormatInt(to-1, 10))
	}
	resp, err := d.c.hc.Do(req)
	if err != nil {
		return 0, attemptErr(ctx, w, err)
	}
	defer resp.Body.Close()
	corrupt := func(format string, args ...any) error {
		return failf(ErrCorrupt, "%s: %s: %s; the partial download was removed", describe(d.repo, d.commit), t.entry.Path, fmt.Sprintf(format, args...))
	}
	body := io.Reader(&touchReader{r: resp.Body, w: w})
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, _, total, ok := ParseContentRange(resp.Header.Get("Content-Range"))
		if !ok || first != pos {
			return 0, failf(ErrHTTP, "%s: %s: asked for bytes from %d, the answer's Content-Range is %s", describe(d.repo, d.commit), t.entry.Path, pos, shown(resp.Header.Get("Content-Range")))
		}
		if total >= 0 && total != size {
			return 0, corrupt("the Hub serves %d bytes, its listing says %d", total, size)
		}
	case http.StatusOK:
		if resp.ContentLength >= 0 && resp.ContentLength != size {
			return 0, corrupt("the Hub serves %d bytes, its listing says %d", resp.ContentLength, size)
		}
		if pos > 0 {
			// The server ignored Range: skip what is already here.
			if n, err := io.CopyN(io.Discard, body, pos); err != nil || n != pos {
				return 0, attemptErr(ctx, w, fmt.Errorf("answer ended while skipping to byte %d: %v", pos, err))
			}
		}
	default:
		if origin(resp.Request.URL) != origin(d.c.endpoint) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			// The CDN refuses a signed URL that expired: asking the Hub again
			// gives a fresh one.
			return 0, &retryable{err: fmt.Errorf("HTTP %d from %s", resp.StatusCode, redactURL(resp.Request.URL))}
		}
		ec := errContext{repo: d.repo, revision: d.revision, path: t.entry.Path, file: true}
		return 0, d.c.statusError(resp, ec)
	}
	want := to - pos
	buf := make([]byte, min(int64(copyBuf), max(want, 1)))
	var n int64
	for n < want {
		m, rerr := body.Read(buf[:min(int64(len(buf)), want-n)])
		if m > 0 {
			if _, werr := f.Write(buf[:m]); werr != nil {
				return n, fmt.Errorf("hub: writing %s: %w", f.Name(), diskErr(werr))
			}
			n += int64(m)
			t.fetched.Add(int64(m))
			d.progress.Add(int64(m))
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, attemptErr(ctx, w, rerr)
		}
	}
	return n, nil
}

// copyTask fills a task's partial file from a local copy of the content.
func (d *downloader) copyTask(ctx context.Context, t *blobTask) error {
	removePartial(t)
	src, err := os.Open(t.copyFrom)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer src.Close()
	if err := mkdirAll(filepath.Dir(t.incomplete)); err != nil {
		return err
	}
	dst, err := os.OpenFile(t.incomplete, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	_, err = io.Copy(dst, ctxReader{ctx, io.LimitReader(src, t.entry.Size+1)})
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("hub: copying %s: %w", t.copyFrom, diskErr(err))
	}
	return d.finishTask(ctx, t)
}

// ctxReader stops reading once ctx is done, so that long local copies
// and digests heed a cancel.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// finishTask appends the part files to the prefix in order, checks the
// size and digest, and renames the result to dest. A mismatch removes the
// partial files and publishes nothing. A cancel stops it between chunks;
// what it leaves (a longer prefix, parts not yet appended) is a state the
// next run resumes from.
func (d *downloader) finishTask(ctx context.Context, t *blobTask) error {
	f, err := os.OpenFile(t.incomplete, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	h := newDigest(t.entry)
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		f.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("hub: reading %s: %w", t.incomplete, err)
	}
	_, parts, err := scanPartial(t)
	if err != nil {
		f.Close()
		return err
	}
	for _, p := range parts {
		if p.start > n {
			f.Close()
			return fmt.Errorf("hub: %s: bytes %d to %d are missing from the partial download", t.entry.Path, n, p.start)
		}
		if p.start+p.size > n {
			if err := appendPart(ctx, f, h, p, n-p.start); err != nil {
				f.Close()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
			n = p.start + p.size
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("hub: %s: %w", t.incomplete, diskErr(err))
			}
		}
		_ = os.Remove(p.path)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("hub: %s: %w", t.incomplete, diskErr(err))
	}
	got := hex.EncodeToString(h.Sum(nil))
	want, algo := t.entry.OID, "git blob sha1"
	if t.entry.LFS {
		want, algo = t.entry.SHA256, "sha256"
	}
	if n != t.entry.Size || got != want {
		removePartial(t)
		return failf(ErrCorrupt, "%s: %s: got %d bytes with %s %s, the Hub lists %d bytes with %s %s; nothing was published and the partial download was removed",
			describe(d.repo, d.commit), t.entry.Path, n, algo, got, t.entry.Size, algo, want)
	}
	if err := mkdirAll(filepath.Dir(t.dest)); err != nil {
		return err
	}
	if err := os.Chmod(t.incomplete, fileMode); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(t.incomplete, t.dest); err != nil {
		return fmt.Errorf("hub: %w", diskErr(err))
	}
	return nil
}

// appendPart appends part p, less its first skip bytes, to f and h.
func appendPart(ctx context.Context, f *os.File, h io.Writer, p partFile, skip int64) error {
	pf, err := os.Open(p.path)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer pf.Close()
	if _, err := pf.Seek(skip, io.SeekStart); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	want := p.size - skip
	m, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, io.LimitReader(pf, want)})
	if err == nil && m != want {
		err = fmt.Errorf("%s shrank while being appended", p.path)
	}
	if err != nil {
		return fmt.Errorf("hub: appending %s: %w", p.path, diskErr(err))
	}
	return nil
}

// removePartial removes a task's prefix and part files.
func removePartial(t *blobTask) {
	_ = os.Remove(t.incomplete)
	if des, err := os.ReadDir(filepath.Dir(t.incomplete)); err == nil {
		base := filepath.Base(t.incomplete)
		for _, de := range des {
			if _, ok := ParsePartName(base, de.Name()); ok {
				_ = os.Remove(filepath.Join(filepath.Dir(t.incomplete), de.Name()))
			}
		}
	}
}
