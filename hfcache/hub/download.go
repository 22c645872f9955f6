package hub

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/hfcache"
)

// Defaults of Options.
const (
	DefaultConnections = 8
	MaxConnections     = 256 // bounds Options.Connections
	DefaultPartSize    = 64 << 20
	DefaultRetries     = 5
	DefaultRetryWait   = time.Second
	DefaultMaxWait     = 8 * time.Second
	DefaultStall       = 60 * time.Second
)

// Options says what to download and how. Zero fields take their defaults;
// the environment is read for those marked so.
type Options struct {
	// Repo is "ORG/NAME", or "ORG/NAME@REVISION".
	Repo string
	// Revision is a branch, tag, "refs/pr/N" or a 40-hex commit; empty
	// means the one in Repo, else "main". Giving one both here and in Repo
	// is an error unless they are the same.
	Revision string
	// Include and Exclude select files (Glob patterns, as huggingface_hub's
	// allow_patterns and ignore_patterns); no Include means every file.
	Include, Exclude []string
	// LocalDir, when set, receives the files as huggingface_hub's local_dir
	// mode lays them out, instead of the hub cache.
	LocalDir string
	// CacheDir is the hub cache folder; empty means hfcache.CacheRoot().
	CacheDir string
	// Endpoint is the Hub's URL; empty means EndpointFromEnv().
	Endpoint string
	// Token is the access token; empty means TokenFromEnv().
	Token string
	// Offline forbids network access; OfflineFromEnv() also turns it on.
	Offline bool
	// Connections bounds the requests in flight: 1…MaxConnections
	// (DefaultConnections is dgq download's default; 0 is refused).
	Connections int
	// PartSize: a file with at least twice this much left to fetch is
	// fetched in ranged parts of at least this size, concurrently (default
	// 64 MiB; negative: never split).
	PartSize int64
	// Retries is how many times a request is retried after failing without
	// progress (default 5; negative: never); RetryWait the first backoff, doubled each time
	// up to MaxWait (defaults 1s and 8s); Stall how long a transfer may go
	// without a byte before it counts as failed (default 60s).
	Retries            int
	RetryWait, MaxWait time.Duration
	Stall              time.Duration
	// Progress, if set, receives the bytes fetched (one phase).
	Progress Progress
	// Transport carries the requests; nil means a clone of
	// http.DefaultTransport (proxies from the environment) on HTTP/1.1.
	Transport http.RoundTripper
}

// Progress receives the progress of the transfer: Start once with the
// bytes to fetch, Add as they arrive, Finish at the end. Download calls it
// from one goroutine at a time.
type Progress interface {
	Start(phase string, total int64)
	Add(n int64)
	Finish()
}

// What happened to a file (FileResult.Action).
const (
	// ActionDownloaded: fetched from the Hub, all of it this run.
	ActionDownloaded = "downloaded"
	// ActionResumed: fetched from the Hub, completing a partial download.
	ActionResumed = "resumed"
	// ActionPresent: already in place; nothing fetched.
	ActionPresent = "present"
	// ActionLinked: its content was in the cache; only the snapshot entry
	// was made.
	ActionLinked = "linked"
	// ActionCopied: --local-dir only: copied from the hub cache.
	ActionCopied = "copied"
)

// FileResult describes one file of the result.
type FileResult struct {
	Path string
	Size int64
	LFS  bool
	// ETag is the blob name: the git blob id, or the sha256 for LFS.
	ETag string
	// SHA256 is the content's sha256 for an LFS file, else "".
	SHA256 string
	// Fetched is the bytes of this file fetched from the Hub by this run.
	Fetched int64
	// Action is one of the Action constants.
	Action string
	// Local is where the file is: the snapshot entry, or DIR/<path>.
	Local string
}

// Result is what Download did.
type Result struct {
	Repo string
	// Revision is the revision asked for ("main" by default).
	Revision string
	// Commit is the 40-hex commit it resolved to.
	Commit string
	// Snapshot is the absolute path of the snapshot folder
	// (<cache>/models--ORG--NAME/snapshots/<commit>), or of --local-dir.
	Snapshot string
	// LocalDir reports a --local-dir download.
	LocalDir bool
	// Offline reports that nothing was asked of the network.
	Offline bool
	// Complete is true when every selected file of the listing is known to
	// be in place; false only offline without a cached listing.
	Complete bool
	// Files are the selected files, sorted by path.
	Files []FileResult
	// BytesFetched is the total fetched from the Hub by this run.
	BytesFetched int64
	// BytesTotal is the total size of the selected files.
	BytesTotal int64
	Elapsed    time.Duration
}

// downloader is one Download run.
type downloader struct {
	c                      *client
	repo, revision, commit string
	cache                  cacheLayout
	hasCache               bool
	local                  *localLayout
	filter                 Filter
	conns                  int
	partSize               int64
	slots                  chan struct{}
	progress               *lockedProgress
}

// Download fetches the files of a repository revision from the Hub into
// the hub cache (or opts.LocalDir), laid out exactly as huggingface_hub's
// snapshot_download lays them out, and returns what it did; see the
// package documentation for the protocol, the layout and the guarantees.
func Download(ctx context.Context, opts Options) (*Result, error) {
	t0 := time.Now()
	d, err := newDownloader(opts)
	if err != nil {
		return nil, err
	}
	var res *Result
	if opts.Offline || OfflineFromEnv() {
		res, err = d.offline()
	} else {
		res, err = d.online(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}

// newDownloader checks the options and fills in the defaults.
func newDownloader(opts Options) (*downloader, error) {
	if err := limits.First(ErrOptions, limits.Min("--connections", opts.Connections, 1),
		limits.Max("--connections", opts.Connections, MaxConnections, fmt.Sprintf("the maximum of %d requests in flight", MaxConnections))); err != nil {
		return nil, err
	}
	ref, ok := hfcache.ParseRepoRef(opts.Repo)
	if !ok {
		return nil, failf(ErrOptions, "repo %s is not ORG/NAME[@REVISION]", shown(opts.Repo))
	}
	rev := ref.Revision
	switch {
	case opts.Revision != "" && rev != "" && opts.Revision != rev:
		return nil, failf(ErrOptions, "revision given twice: %s in %s and %s: give one", shown(rev), shown(opts.Repo), shown(opts.Revision))
	case opts.Revision != "":
		rev = opts.Revision
	case rev == "":
		rev = hfcache.DefaultRevision
	}
	if _, ok := hfcache.ParseRepoRef(ref.Repo + "@" + rev); !ok {
		return nil, failf(ErrOptions, "%s: revision %s is not a branch, tag or commit name", ref.Repo, shown(rev))
	}
	d := &downloader{repo: ref.Repo, revision: rev, filter: NewFilter(opts.Include, opts.Exclude)}
	root := opts.CacheDir
	if root == "" {
		root, _ = hfcache.CacheRoot()
	}
	if root != "" {
		d.cache, d.hasCache = newCacheLayout(root, ref.Repo), true
	}
	if opts.LocalDir != "" {
		dir, err := filepath.Abs(opts.LocalDir)
		if err != nil {
			return nil, failf(ErrOptions, "--local-dir %s: %v", shown(opts.LocalDir), err)
		}
		if hfcache.IsInCache(dir) || (d.hasCache && within(dir, d.cache.root)) {
			return nil, failf(ErrOptions, "--local-dir %s lies inside the hub cache: choose a folder outside it", dir)
		}
		l := newLocalLayout(dir)
		d.local = &l
	} else if !d.hasCache {
		return nil, failf(ErrOptions, "cannot locate the hub cache (no home folder): set HF_HUB_CACHE or pass --local-dir")
	}
	d.conns = opts.Connections
	d.partSize = cmp.Or(opts.PartSize, DefaultPartSize)
	d.slots = make(chan struct{}, d.conns)
	d.progress = &lockedProgress{p: opts.Progress}
	return d, nil
}

// within reports whether the absolute path p is dir or lies under it.
func within(p, dir string) bool {
	a, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(a, p)
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))))
}

// online runs the download with the network.
func (d *downloader) online(ctx context.Context, opts Options) (*Result, error) {
	ep, err := parseEndpoint(cmp.Or(opts.Endpoint, EndpointFromEnv()))
	if err != nil {
		return nil, err
	}
	token := opts.Token
	if token == "" {
		if token, err = TokenFromEnv(); err != nil {
			return nil, err
		}
	}
	if !validToken(token) {
		return nil, failf(ErrOptions, "the access token holds spaces or non-ASCII characters: check HF_TOKEN or the token file %s", TokenPath())
	}
	policy := retryPolicy{
		retries: cmp.Or(opts.Retries, DefaultRetries),
		wait:    cmp.Or(opts.RetryWait, DefaultRetryWait),
		maxWait: cmp.Or(opts.MaxWait, DefaultMaxWait),
		stall:   cmp.Or(opts.Stall, DefaultStall),
	}
	if policy.retries < 0 {
		policy.retries = 0
	}
	d.c = newClient(ep, token, d.repo, opts.Transport, policy, d.conns)

	d.commit = d.revision
	if !isCommit(d.revision) {
		if d.commit, err = d.c.resolveRevision(ctx, d.revision); err != nil {
			return nil, d.interrupted(ctx, err)
		}
	}
	listing, err := d.listing(ctx)
	if err != nil {
		return nil, d.interrupted(ctx, err)
	}
	selected := d.selectEntries(listing)
	if len(selected) == 0 {
		return nil, d.noneSelected(len(listing))
	}
	res := d.newResult(selected)
	tasks, err := d.plan(selected, res)
	if err != nil {
		return nil, err
	}
	if err := d.checkSpace(tasks); err != nil {
		return nil, err
	}
	var total int64
	for _, t := range tasks {
		if t.copyFrom == "" {
			total += t.entry.Size - partialBytes(t)
		}
	}
	d.progress.Start("download "+d.repo, total)
	err = d.runTasks(ctx, tasks)
	d.progress.Finish()
	if err != nil {
		return nil, d.interrupted(ctx, err)
	}
	for _, t := range tasks {
		res.BytesFetched += t.fetched.Load()
	}
	d.fillTaskResults(res, tasks)
	if d.local == nil && d.revision != d.commit {
		if err := writeRef(d.cache.ref(d.revision), d.commit); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// interrupted reports a canceled run as such (partial files stay for the
// next run), and any other error as it is.
func (d *downloader) interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("hub: download of %s interrupted (partial files are kept; run again to resume): %w", describe(d.repo, d.revision), ctx.Err())
	}
	return err
}

// listing returns the files of the commit: from the tree cache when it
// holds them, else from the Hub (then stored in the tree cache).
func (d *downloader) listing(ctx context.Context) ([]Entry, error) {
	folder := d.treeFolder()
	if entries := readTreeCache(folder, d.commit); entries != nil {
		return entries, nil
	}
	entries, err := d.c.listTree(ctx, d.commit)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	if err := writeTreeCache(folder, d.commit, entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// treeFolder is where the tree cache lives.
func (d *downloader) treeFolder() string {
	if d.local != nil {
		return d.local.meta
	}
	return d.cache.repoDir
}

// selectEntries applies the filter (and, for --local-dir, drops paths
// under .cache/huggingface/, where the metadata lives).
func (d *downloader) selectEntries(listing []Entry) []Entry {
	var out []Entry
	for _, e := range listing {
		if d.local != nil && (e.Path == ".cache/huggingface" || strings.HasPrefix(e.Path, ".cache/huggingface/")) {
			continue
		}
		if d.filter.Keep(e.Path) {
			out = append(out, e)
		}
	}
	return out
}

// noneSelected is the error for a selection with no file.
func (d *downloader) noneSelected(listed int) error {
	if listed == 0 {
		return failf(ErrEntryNotFound, "%s has no files", describe(d.repo, d.revision))
	}
	return failf(ErrEntryNotFound, "no file of %s (%d files) matches the --include/--exclude patterns", describe(d.repo, d.revision), listed)
}

// newResult starts the result with the selected files.
func (d *downloader) newResult(selected []Entry) *Result {
	res := &Result{Repo: d.repo, Revision: d.revision, Commit: d.commit, Complete: true, LocalDir: d.local != nil}
	if d.local != nil {
		res.Snapshot = d.local.dir
	} else {
		res.Snapshot = absPath(d.cache.snapshot(d.commit))
	}
	for _, e := range selected {
		fr := FileResult{Path: e.Path, Size: e.Size, LFS: e.LFS, ETag: e.ETag(), SHA256: e.SHA256, Action: ActionPresent}
		if d.local != nil {
			fr.Local = d.local.file(e.Path)
		} else {
			fr.Local = absPath(d.cache.pointer(d.commit, e.Path))
		}
		res.Files = append(res.Files, fr)
		res.BytesTotal += e.Size
	}
	return res
}

// absPath makes p absolute when it can.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// plan decides, for every selected file, whether it is in place, only
// needs its snapshot entry, can be copied from the cache, or must be
// fetched; it returns the tasks (one per blob in the cache) and makes the
// snapshot entries whose blob is already there.
func (d *downloader) plan(selected []Entry, res *Result) ([]*blobTask, error) {
	if d.local != nil {
		return d.planLocal(selected, res)
	}
	byETag := map[string]*blobTask{}
	var tasks []*blobTask
	for i, e := range selected {
		pointer := d.cache.pointer(d.commit, e.Path)
		if sz, ok := fileSize(pointer); ok && sz == e.Size {
			continue // ActionPresent
		}
		blob := d.cache.blob(e.ETag())
		if sz, ok := fileSize(blob); ok && sz == e.Size {
			if err := linkPointer(pointer, blob); err != nil {
				return nil, err
			}
			res.Files[i].Action = ActionLinked
			continue
		}
		t := byETag[e.ETag()]
		if t == nil {
			t = &blobTask{entry: e, dest: blob, incomplete: blob + ".incomplete", lock: d.cache.lock(e.ETag())}
			byETag[e.ETag()] = t
			tasks = append(tasks, t)
		}
		t.pointers = append(t.pointers, pointer)
	}
	if err := d.prepareCache(); err != nil {
		return nil, err
	}
	return sortTasks(tasks), nil
}

// prepareCache creates the repo folder and CACHEDIR.TAG (best effort) as
// huggingface_hub does.
func (d *downloader) prepareCache() error {
	if err := mkdirAll(d.cache.repoDir); err != nil {
		return err
	}
	writeIfMissing(filepath.Join(d.cache.root, "CACHEDIR.TAG"), []byte(cachedirTag))
	return nil
}

// planLocal is plan for --local-dir.
func (d *downloader) planLocal(selected []Entry, res *Result) ([]*blobTask, error) {
	if err := d.local.prepare(); err != nil {
		return nil, err
	}
	var tasks []*blobTask
	for _, e := range selected {
		dest := d.local.file(e.Path)
		if d.localPresent(e, dest) {
			if err := d.writeLocalMetadata(e); err != nil {
				return nil, err
			}
			continue
		}
		t := &blobTask{entry: e, dest: dest, incomplete: d.local.incomplete(e.Path, e.ETag()), lock: d.local.lock(e.Path), localPath: e.Path}
		if d.hasCache {
			if sz, ok := fileSize(d.cache.blob(e.ETag())); ok && sz == e.Size {
				t.copyFrom = d.cache.blob(e.ETag())
			}
		}
		tasks = append(tasks, t)
	}
	return sortTasks(tasks), nil
}

// localPresent reports whether DIR/<path> already holds the content: its
// metadata names the etag and the file is not newer than the metadata, or
// (no usable metadata) the file's size and digest match.
func (d *downloader) localPresent(e Entry, dest string) bool {
	fi, err := os.Stat(dest)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
		return false
	}
	if m, ok := d.local.readLocalMetadata(e.Path); ok && m.ETag == e.ETag() &&
		float64(fi.ModTime().UnixNano())/1e9-1 <= m.Timestamp {
		return true
	}
	f, err := os.Open(dest)
	if err != nil {
		return false
	}
	defer f.Close()
	h := newDigest(e)
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	want := e.OID
	if e.LFS {
		want = e.SHA256
	}
	return fmt.Sprintf("%x", h.Sum(nil)) == want
}

// writeLocalMetadata records the commit and etag of a --local-dir file.
func (d *downloader) writeLocalMetadata(e Entry) error {
	if m, ok := d.local.readLocalMetadata(e.Path); ok && m.Commit == d.commit && m.ETag == e.ETag() {
		if fi, err := os.Stat(d.local.file(e.Path)); err == nil && float64(fi.ModTime().UnixNano())/1e9-1 <= m.Timestamp {
			return nil
		}
	}
	return writeFileAtomic(d.local.metadata(e.Path), formatLocalMetadata(d.commit, e.ETag(), time.Now()))
}

// sortTasks orders tasks largest first (then by path), so that the long
// transfers start early.
func sortTasks(tasks []*blobTask) []*blobTask {
	slices.SortFunc(tasks, func(a, b *blobTask) int {
		if c := cmp.Compare(b.entry.Size, a.entry.Size); c != 0 {
			return c
		}
		return strings.Compare(a.entry.Path, b.entry.Path)
	})
	return tasks
}

// partialBytes is what a task already has on disk (prefix and parts).
func partialBytes(t *blobTask) int64 {
	if t.copyFrom != "" {
		return 0
	}
	var n int64
	if fi, err := os.Lstat(t.incomplete); err == nil && fi.Mode().IsRegular() && fi.Size() <= t.entry.Size {
		n = fi.Size()
	}
	if des, err := os.ReadDir(filepath.Dir(t.incomplete)); err == nil {
		base := filepath.Base(t.incomplete)
		for _, de := range des {
			if start, ok := ParsePartName(base, de.Name()); ok && start < t.entry.Size {
				if fi, err := de.Info(); err == nil && fi.Size() <= t.entry.Size-start {
					n += fi.Size()
				}
			}
		}
	}
	return min(n, t.entry.Size)
}

// checkSpace refuses to start when the file system lacks the space still
// needed: the bytes left to fetch (or copy), plus room for appending the
// largest part while it still exists.
func (d *downloader) checkSpace(tasks []*blobTask) error {
	if len(tasks) == 0 {
		return nil
	}
	var need, largest int64
	for _, t := range tasks {
		left := t.entry.Size - partialBytes(t)
		need += left
		if d.partSize > 0 && t.entry.Size >= 2*d.partSize {
			largest = max(largest, t.entry.Size/int64(max(1, min(int(t.entry.Size/d.partSize), d.conns))))
		}
	}
	need += largest
	dir := d.cache.repoDir
	if d.local != nil {
		dir = d.local.dir
	}
	free, ok := diskFree(dir)
	if ok && free < need {
		return failf(ErrDiskFull, "%s needs %s more and %s has %s free: free some space (or pass --local-dir on another disk)",
			describe(d.repo, d.revision), humanBytes(need), dir, humanBytes(free))
	}
	return nil
}

// diskFree is freeSpace, replaceable by tests.
var diskFree = freeSpace

// humanBytes renders a byte count for a message.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// runTasks runs every task (a bounded number at once, each under its
// lock); the first failure cancels the others, which keep their partial
// files.
func (d *downloader) runTasks(ctx context.Context, tasks []*blobTask) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2 * d.conns)
	for _, t := range tasks {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return d.runTask(gctx, t) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// runTask brings one blob in under its lock and publishes it.
func (d *downloader) runTask(ctx context.Context, t *blobTask) error {
	unlock, err := lockFile(ctx, t.lock)
	if err != nil {
		return err
	}
	defer unlock()
	if sz, ok := fileSize(t.dest); ok && sz == t.entry.Size && d.local == nil {
		// Another process finished this blob while we waited for its lock.
		return d.publish(t)
	}
	if t.copyFrom != "" {
		err = d.copyTask(ctx, t)
	} else {
		err = d.fetchTask(ctx, t)
	}
	if err != nil {
		return err
	}
	return d.publish(t)
}

// publish makes the snapshot entries of a verified blob, or records the
// metadata of a --local-dir file.
func (d *downloader) publish(t *blobTask) error {
	if d.local != nil {
		return d.writeLocalMetadata(t.entry)
	}
	for _, p := range t.pointers {
		if err := linkPointer(p, t.dest); err != nil {
			return err
		}
	}
	return nil
}

// fillTaskResults records each task's action and bytes in the result.
func (d *downloader) fillTaskResults(res *Result, tasks []*blobTask) {
	index := map[string]int{}
	for i, f := range res.Files {
		index[f.Path] = i
	}
	for _, t := range tasks {
		action := ActionDownloaded
		switch {
		case t.copyFrom != "":
			action = ActionCopied
		case t.resumed:
			action = ActionResumed
		}
		paths := []string{t.entry.Path}
		if d.local == nil {
			paths = paths[:0]
			for _, p := range t.pointers {
				rel, _ := filepath.Rel(d.cache.snapshot(d.commit), p)
				paths = append(paths, filepath.ToSlash(rel))
			}
		}
		for k, p := range paths {
			i, ok := index[p]
			if !ok {
				continue
			}
			if k == 0 {
				res.Files[i].Action, res.Files[i].Fetched = action, t.fetched.Load()
			} else {
				res.Files[i].Action = ActionLinked
			}
		}
	}
}

// lockedProgress serializes calls into a Progress; a nil one does nothing.
type lockedProgress struct {
	mu sync.Mutex
	p  Progress
}

func (l *lockedProgress) Start(phase string, total int64) {
	if l.p != nil {
		l.mu.Lock()
		l.p.Start(phase, total)
		l.mu.Unlock()
	}
}

func (l *lockedProgress) Add(n int64) {
	if l.p != nil {
		l.mu.Lock()
		l.p.Add(n)
		l.mu.Unlock()
	}
}

func (l *lockedProgress) Finish() {
	if l.p != nil {
		l.mu.Lock()
		l.p.Finish()
		l.mu.Unlock()
	}
}
