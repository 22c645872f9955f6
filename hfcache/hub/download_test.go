package hub

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/hfcache/hub/hubtest"
	"github.com/dgq-dev/dgq/internal/errclass"
)

const testRepo = "dgq-test/fake-model"

// Paths of the fake repository.
const (
	pConfig  = "config.json"
	pReadme  = "README.md"
	pNested  = "nested/deep/tokenizer.json"
	pOdd     = "dir with space/a+b#c%.txt"
	pEmpty   = "empty.txt"
	pModel   = "model.safetensors"
	pBig     = "weights/big.bin"
	bigSize  = 1 << 20
	partSize = 64 << 10
)

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fakeFiles is the fake repository: regular files (one nested, one with
// characters that need escaping, one empty) and LFS files.
func fakeFiles() []hubtest.File {
	return []hubtest.File{
		{Path: pConfig, Data: []byte(`{"model_type":"fake","hidden_size":8}` + "\n")},
		{Path: pReadme, Data: []byte("# fake\n")},
		{Path: pNested, Data: []byte(`{"version":"1.0","model":{}}`)},
		{Path: pOdd, Data: []byte("odd name\n")},
		{Path: pEmpty, Data: nil},
		{Path: pModel, Data: randBytes(1, 300<<10+7), LFS: true},
		{Path: pBig, Data: randBytes(2, bigSize), LFS: true},
	}
}

func fileData(path string) []byte {
	for _, f := range fakeFiles() {
		if f.Path == path {
			return f.Data
		}
	}
	return nil
}

func allPaths() []string {
	var out []string
	for _, f := range fakeFiles() {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

// newHub starts a fake Hub with the fake repository (and its extra refs)
// and points the HF_* variables at it and at a fresh cache.
func newHub(t *testing.T, mod ...func(*hubtest.Repo)) (*hubtest.Server, string) {
	t.Helper()
	r := hubtest.Repo{ID: testRepo, Refs: []string{"v1.0", "refs/pr/1"}, Files: fakeFiles()}
	for _, m := range mod {
		m(&r)
	}
	srv := hubtest.New(r)
	srv.PageSize = 3 // force pagination
	t.Cleanup(srv.Close)
	return srv, setEnv(t, srv.URL())
}

// setEnv isolates the HF_* variables and returns a fresh cache folder.
func setEnv(t *testing.T, endpoint string) string {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "hub")
	for k, v := range map[string]string{
		"DGQ_HF_HOME": "", "HF_HUB_CACHE": cache, "HUGGINGFACE_HUB_CACHE": "", "HF_HOME": filepath.Join(t.TempDir(), "hfhome"),
		"XDG_CACHE_HOME": "", "HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": "",
		"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "", "HF_ENDPOINT": endpoint,
	} {
		t.Setenv(k, v)
	}
	return cache
}

// fast are options that keep the tests quick: short backoffs, small parts.
func fast(o Options) Options {
	if o.Repo == "" {
		o.Repo = testRepo
	}
	o.RetryWait, o.MaxWait = time.Millisecond, 5*time.Millisecond
	if o.Connections == 0 {
		o.Connections = DefaultConnections
	}
	if o.PartSize == 0 {
		o.PartSize = partSize
	}
	if o.Stall == 0 {
		o.Stall = 5 * time.Second
	}
	return o
}

// readLikeHF reads the cache the way huggingface_hub does: refs/<rev>
// (unless rev is the commit), then snapshots/<commit>/<path>, which must
// be a relative symlink into ../../blobs/ (one more ../ per folder level)
// naming the blob by etag, and returns the bytes read through it.
func readLikeHF(t *testing.T, cache, repo, rev, commit, path string, lfs bool) []byte {
	t.Helper()
	repoDir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	if rev != commit {
		ref, err := os.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(rev)))
		if err != nil {
			t.Fatalf("refs/%s: %v", rev, err)
		}
		if string(ref) != commit {
			t.Fatalf("refs/%s holds %q, want %q (no newline)", rev, ref, commit)
		}
	} else if _, err := os.Stat(filepath.Join(repoDir, "refs", rev)); err == nil {
		t.Fatalf("a ref was written for the commit revision %s", rev)
	}
	pointer := filepath.Join(repoDir, "snapshots", commit, filepath.FromSlash(path))
	fi, err := os.Lstat(pointer)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is not a symlink: %v %v", pointer, fi, err)
	}
	target, _ := os.Readlink(pointer)
	depth := strings.Count(path, "/")
	data := fileData(path)
	etag := hubtest.GitBlobID(data)
	if lfs {
		etag = hubtest.SHA256(data)
	}
	want := strings.Repeat("../", depth+2) + "blobs/" + etag
	if target != filepath.FromSlash(want) {
		t.Fatalf("%s -> %s, want %s", path, target, want)
	}
	blob := filepath.Join(repoDir, "blobs", etag)
	if bi, err := os.Lstat(blob); err != nil || !bi.Mode().IsRegular() || bi.Mode().Perm() != 0o644 {
		t.Fatalf("blob %s: %v %v", etag, bi, err)
	}
	got, err := os.ReadFile(pointer)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// noPartials asserts no partial download is left in the cache.
func noPartials(t *testing.T, cache string) {
	t.Helper()
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(p, ".incomplete") || strings.HasSuffix(p, ".tmp")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

func isLFS(path string) bool { return path == pModel || path == pBig }

// TestLayoutLikeHuggingFaceHub: for every kind of revision, the cache is
// laid out as huggingface_hub lays it out and reads back byte for byte.
func TestLayoutLikeHuggingFaceHub(t *testing.T) {
	for _, rev := range []string{"", "main", "v1.0", "refs/pr/1", "commit"} {
		t.Run("rev="+rev, func(t *testing.T) {
			srv, cache := newHub(t)
			commit := srv.CommitOf(testRepo)
			o := fast(Options{Revision: rev})
			if rev == "commit" {
				o.Revision = commit
			}
			res, err := Download(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			wantRev := cmpOr(o.Revision, "main")
			if res.Commit != commit || res.Revision != wantRev {
				t.Fatalf("commit %s revision %s", res.Commit, res.Revision)
			}
			snap := filepath.Join(cache, "models--dgq-test--fake-model", "snapshots", commit)
			if abs, _ := filepath.Abs(snap); res.Snapshot != abs {
				t.Fatalf("snapshot %s, want %s", res.Snapshot, abs)
			}
			for _, p := range allPaths() {
				if got := readLikeHF(t, cache, testRepo, wantRev, commit, p, isLFS(p)); !bytes.Equal(got, fileData(p)) {
					t.Errorf("%s: content differs", p)
				}
			}
			// hfcache resolves what was written.
			r, err := hfcache.Resolve(cache, hfcache.RepoRef{Repo: testRepo, Revision: o.Revision})
			if err != nil || r.Dir != snap {
				t.Fatalf("hfcache.Resolve: %v %v", r, err)
			}
			tc := readTreeCache(filepath.Join(cache, "models--dgq-test--fake-model"), commit)
			if len(tc) != len(allPaths()) {
				t.Fatalf("tree cache holds %d files", len(tc))
			}
			if _, err := os.Stat(filepath.Join(cache, "CACHEDIR.TAG")); err != nil {
				t.Error(err)
			}
			if _, err := os.Stat(filepath.Join(cache, ".locks", "models--dgq-test--fake-model", hubtest.SHA256(fileData(pBig))+".lock")); err != nil {
				t.Errorf("no lock file: %v", err)
			}
			noPartials(t, cache)
			if res.BytesFetched != res.BytesTotal || srv.TotalServed() != res.BytesTotal {
				t.Errorf("fetched %d, total %d, served %d", res.BytesFetched, res.BytesTotal, srv.TotalServed())
			}
			for _, f := range res.Files {
				if f.Action != ActionDownloaded || f.Fetched != f.Size || f.LFS != isLFS(f.Path) || (f.LFS && f.SHA256 != f.ETag) {
					t.Errorf("file result %+v", f)
				}
			}
			// The tree listing was paginated.
			pages := 0
			for _, rq := range srv.Requests() {
				if strings.Contains(rq.Path, "/tree/") {
					pages++
				}
			}
			if pages < 3 {
				t.Errorf("tree listing in %d pages, want pagination", pages)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestParallel: several requests are in flight at once, across files and
// for the parts of one large file.
func TestParallel(t *testing.T) {
	srv, _ := newHub(t)
	srv.Latency = 40 * time.Millisecond
	if _, err := Download(context.Background(), fast(Options{})); err != nil {
		t.Fatal(err)
	}
	if n := srv.MaxInFlight(); n < 2 {
		t.Errorf("at most %d requests in flight", n)
	}
	if n := srv.MaxInFlightFile(testRepo, pBig); n < 2 {
		t.Errorf("at most %d parts of %s in flight", n, pBig)
	}
	ranges := 0
	for _, rq := range srv.Requests() {
		if rq.File == testRepo+":"+pBig && rq.Range != "" {
			ranges++
		}
	}
	if ranges < 2 {
		t.Errorf("%d ranged requests for %s", ranges, pBig)
	}
}

// TestResume: a partial download (huggingface_hub's <etag>.incomplete
// prefix, and dgq's part files) is completed with Range requests that
// start where the bytes stop; nothing is fetched twice.
func TestResume(t *testing.T) {
	big := fileData(pBig)
	etag := hubtest.SHA256(big)
	cases := []struct {
		name     string
		partSize int64
		prefix   int64
		parts    map[int64]int64 // start → bytes present
		ranges   []string        // Range headers expected among the requests
		served   int64
	}{
		{"prefix, one stream", -1, 123457, nil, []string{"bytes=123457-1048575"}, bigSize - 123457},
		{"prefix, split", partSize, 200000, nil, []string{"bytes=200000-"}, bigSize - 200000},
		{"prefix and parts", partSize, 1000, map[int64]int64{500000: 1000, 800000: 0}, []string{"bytes=1000-", "bytes=501000-"}, bigSize - 2000},
		{"overlapping parts", -1, 10, map[int64]int64{5: 100, 50: 20, 300000: 7}, []string{"bytes=105-299999", "bytes=300007-1048575"}, bigSize - 105 - 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, cache := newHub(t)
			blobs := filepath.Join(cache, "models--dgq-test--fake-model", "blobs")
			os.MkdirAll(blobs, 0o755)
			inc := filepath.Join(blobs, etag+".incomplete")
			os.WriteFile(inc, big[:c.prefix], 0o644)
			for start, n := range c.parts {
				os.WriteFile(partPath(inc, start), big[start:start+n], 0o644)
			}
			res, err := Download(context.Background(), fast(Options{Include: []string{pBig}, PartSize: c.partSize}))
			if err != nil {
				t.Fatal(err)
			}
			if got := readLikeHF(t, cache, testRepo, "main", res.Commit, pBig, true); !bytes.Equal(got, big) {
				t.Fatal("content differs")
			}
			if s := srv.Served(testRepo, pBig); s != c.served {
				t.Errorf("served %d bytes, want %d", s, c.served)
			}
			var seen []string
			for _, rq := range srv.Requests() {
				if rq.File == testRepo+":"+pBig && rq.Range != "" {
					seen = append(seen, rq.Range)
				}
			}
			for _, want := range c.ranges {
				if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("no Range %q among %v", want, seen)
				}
			}
			if res.Files[0].Action != ActionResumed || res.Files[0].Fetched != c.served {
				t.Errorf("result %+v", res.Files[0])
			}
			noPartials(t, cache)
		})
	}
}

// TestFailuresMidStream: connections cut mid-body and transient statuses
// are retried, resuming with Range; nothing is fetched twice.
func TestFailuresMidStream(t *testing.T) {
	cases := []struct {
		name  string
		path  string
		fault hubtest.Fault
	}{
		{"cut regular file", pConfig, hubtest.Fault{CutAfter: 10, Cuts: 2}},
		{"cut LFS file", pModel, hubtest.Fault{CutAfter: 100000, Cuts: 3}},
		{"cut part", pBig, hubtest.Fault{CutAfter: 5000, Cuts: 4}},
		{"503 then fine", pModel, hubtest.Fault{Status: 503, StatusTimes: 2}},
		{"500 then fine", pConfig, hubtest.Fault{Status: 500, StatusTimes: 1}},
		{"CDN 403 (expired signed URL) then fine", pModel, hubtest.Fault{Status: 403, StatusTimes: 2}},
		{"429 then fine", pBig, hubtest.Fault{Status: 429, StatusTimes: 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, cache := newHub(t)
			f := c.fault
			srv.SetFault(testRepo, c.path, &f)
			res, err := Download(context.Background(), fast(Options{Include: []string{c.path}}))
			if err != nil {
				t.Fatal(err)
			}
			if got := readLikeHF(t, cache, testRepo, "main", res.Commit, c.path, isLFS(c.path)); !bytes.Equal(got, fileData(c.path)) {
				t.Fatal("content differs")
			}
			if s := srv.Served(testRepo, c.path); s != int64(len(fileData(c.path))) {
				t.Errorf("served %d bytes for a %d-byte file", s, len(fileData(c.path)))
			}
		})
	}
	t.Run("server without Range support", func(t *testing.T) {
		srv, cache := newHub(t)
		srv.IgnoreRange = true
		srv.SetFault(testRepo, pModel, &hubtest.Fault{CutAfter: 70000, Cuts: 1})
		res, err := Download(context.Background(), fast(Options{Include: []string{pModel, pBig}}))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{pModel, pBig} {
			if got := readLikeHF(t, cache, testRepo, "main", res.Commit, p, true); !bytes.Equal(got, fileData(p)) {
				t.Fatalf("%s: content differs", p)
			}
		}
	})
	t.Run("Hub 403 is not retried", func(t *testing.T) {
		srv, _ := newHub(t)
		srv.SetFault(testRepo, pConfig, &hubtest.Fault{Status: 403, StatusTimes: 1})
		_, err := Download(context.Background(), fast(Options{Include: []string{pConfig}}))
		if !errors.Is(err, ErrAuth) || errclass.Of(err) != errclass.Usage {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("API 503 then fine", func(t *testing.T) {
		srv, _ := newHub(t)
		srv.FailAPI(503, 502)
		if _, err := Download(context.Background(), fast(Options{Include: []string{pConfig}})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		srv, cache := newHub(t)
		srv.SetFault(testRepo, pModel, &hubtest.Fault{Status: 503, StatusTimes: 1000})
		_, err := Download(context.Background(), fast(Options{Include: []string{pModel}, Retries: 2}))
		if !errors.Is(err, ErrNetwork) || errclass.Of(err) != errclass.IO || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), pModel) {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Stat(filepath.Join(cache, "models--dgq-test--fake-model", "refs", "main")); err == nil {
			t.Error("ref written after a failure")
		}
	})
	t.Run("API gives up", func(t *testing.T) {
		srv, _ := newHub(t)
		srv.FailAPI(503, 503, 503, 503)
		_, err := Download(context.Background(), fast(Options{Retries: 2}))
		if !errors.Is(err, ErrNetwork) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		srv, _ := newHub(t)
		srv.Close()
		_, err := Download(context.Background(), fast(Options{Retries: 1}))
		if !errors.Is(err, ErrNetwork) || errclass.Of(err) != errclass.IO {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestCorruptionRefused: wrong bytes are refused: nothing published, the
// partial download removed, the error names the file.
func TestCorruptionRefused(t *testing.T) {
	for _, path := range []string{pConfig, pModel, pBig} {
		t.Run(path, func(t *testing.T) {
			srv, cache := newHub(t)
			srv.SetFault(testRepo, path, &hubtest.Fault{Corrupt: true})
			_, err := Download(context.Background(), fast(Options{Include: []string{path}}))
			if !errors.Is(err, ErrCorrupt) || errclass.Of(err) != errclass.Invalid || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v", err)
			}
			data := fileData(path)
			etag := hubtest.GitBlobID(data)
			if isLFS(path) {
				etag = hubtest.SHA256(data)
			}
			repoDir := filepath.Join(cache, "models--dgq-test--fake-model")
			if _, err := os.Lstat(filepath.Join(repoDir, "blobs", etag)); err == nil {
				t.Error("blob published")
			}
			if _, err := os.Lstat(filepath.Join(repoDir, "snapshots", srv.CommitOf(testRepo), filepath.FromSlash(path))); err == nil {
				t.Error("symlink published")
			}
			if _, err := os.Lstat(filepath.Join(repoDir, "refs", "main")); err == nil {
				t.Error("ref published")
			}
			noPartials(t, cache)
		})
	}
}

// TestGated: a gated repository needs the right token, from HF_TOKEN or
// the token file; the token never reaches the CDN.
func TestGated(t *testing.T) {
	const token = "hf_secret_token_123"
	cases := []struct {
		name string
		env  func(t *testing.T)
		ok   bool
	}{
		{"no token", func(t *testing.T) {}, false},
		{"wrong HF_TOKEN", func(t *testing.T) { t.Setenv("HF_TOKEN", "hf_wrong") }, false},
		{"HF_TOKEN", func(t *testing.T) { t.Setenv("HF_TOKEN", token) }, true},
		{"legacy variable", func(t *testing.T) { t.Setenv("HUGGING_FACE_HUB_TOKEN", token) }, true},
		{"token file in HF_HOME", func(t *testing.T) {
			home := os.Getenv("HF_HOME")
			os.MkdirAll(home, 0o755)
			os.WriteFile(filepath.Join(home, "token"), []byte(token+"\n"), 0o600)
		}, true},
		{"HF_TOKEN_PATH", func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tok")
			os.WriteFile(p, []byte("  "+token+"\r\n"), 0o600)
			t.Setenv("HF_TOKEN_PATH", p)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := newHub(t, func(r *hubtest.Repo) { r.Token = token })
			c.env(t)
			_, err := Download(context.Background(), fast(Options{}))
			if c.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if !c.ok {
				msg := err.Error()
				if !errors.Is(err, ErrGated) || errclass.Of(err) != errclass.Usage || !strings.Contains(msg, srv.URL()+"/"+testRepo) ||
					!strings.Contains(msg, "HF_TOKEN") || !strings.Contains(msg, "hf auth login") || strings.Contains(msg, "\n") {
					t.Fatalf("err = %v", err)
				}
			}
			authed := false
			for _, rq := range srv.Requests() {
				if rq.CDN && rq.Auth != "" {
					t.Fatalf("the CDN received an Authorization header: %+v", rq)
				}
				if !rq.CDN && rq.Auth != "" {
					authed = true
				}
				if strings.Contains(err2s(err), token) {
					t.Fatal("the token appears in the error")
				}
			}
			if c.ok && !authed {
				t.Error("no request carried the token")
			}
		})
	}
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestNotFound: a repository, revision or file the Hub does not have is a
// usage error naming it.
func TestNotFound(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		fault   *hubtest.Fault
		want    error
		mention string
	}{
		{"repo", Options{Repo: "dgq-test/nope"}, nil, ErrRepoNotFound, "dgq-test/nope"},
		{"repo, commit revision", Options{Repo: "dgq-test/nope", Revision: strings.Repeat("ab", 20)}, nil, ErrRepoNotFound, "dgq-test/nope"},
		{"revision", Options{Revision: "no-such-branch"}, nil, ErrRevisionNotFound, "no-such-branch"},
		{"commit", Options{Revision: strings.Repeat("0", 40)}, nil, ErrRevisionNotFound, strings.Repeat("0", 40)},
		{"entry (EntryNotFound)", Options{Include: []string{pConfig}}, &hubtest.Fault{Status: 404, StatusTimes: 1, Code: "EntryNotFound"}, ErrEntryNotFound, pConfig},
		{"entry (bare 404)", Options{Include: []string{pConfig}}, &hubtest.Fault{Status: 404, StatusTimes: 1}, ErrEntryNotFound, pConfig},
		{"no file matches", Options{Include: []string{"*.gguf"}}, nil, ErrEntryNotFound, "--include"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := newHub(t)
			if c.fault != nil {
				srv.SetFault(testRepo, pConfig, c.fault)
			}
			_, err := Download(context.Background(), fast(c.opts))
			if !errors.Is(err, c.want) || errclass.Of(err) != errclass.Usage || !strings.Contains(err.Error(), c.mention) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestIncludeExclude selects files as huggingface_hub's allow_patterns and
// ignore_patterns; what is not selected is neither fetched nor linked.
func TestIncludeExclude(t *testing.T) {
	cases := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"json anywhere", []string{"*.json"}, nil, []string{pConfig, pNested}},
		{"folder", []string{"nested/"}, nil, []string{pNested}},
		{"two includes", []string{"*.safetensors", "README.md"}, nil, []string{pReadme, pModel}},
		{"exclude", nil, []string{"*.bin", "*.safetensors", "dir with space/*"}, []string{pReadme, pConfig, pEmpty, pNested}},
		{"include and exclude", []string{"*.json"}, []string{"nested/*"}, []string{pConfig}},
		{"class", []string{"[a-f]*"}, []string{"[!c]*"}, []string{pConfig}},
		{"question mark", []string{"??????.txt"}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, cache := newHub(t)
			res, err := Download(context.Background(), fast(Options{Include: c.include, Exclude: c.exclude}))
			if c.want == nil {
				if !errors.Is(err, ErrEntryNotFound) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range res.Files {
				got = append(got, f.Path)
			}
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) {
				t.Fatalf("selected %v, want %v", got, want)
			}
			for _, p := range allPaths() {
				_, err := os.Lstat(filepath.Join(cache, "models--dgq-test--fake-model", "snapshots", res.Commit, filepath.FromSlash(p)))
				if slices.Contains(want, p) != (err == nil) {
					t.Errorf("%s in snapshot: %v", p, err == nil)
				}
				if !slices.Contains(want, p) && srv.Served(testRepo, p) != 0 {
					t.Errorf("%s fetched", p)
				}
			}
		})
	}
}

// TestRerunFetchesNothing: a complete snapshot downloaded again fetches
// no byte and lists nothing (the tree cache answers).
func TestRerunFetchesNothing(t *testing.T) {
	srv, cache := newHub(t)
	if _, err := Download(context.Background(), fast(Options{})); err != nil {
		t.Fatal(err)
	}
	srv.ResetStats()
	res, err := Download(context.Background(), fast(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if srv.TotalServed() != 0 || res.BytesFetched != 0 {
		t.Fatalf("re-run fetched %d bytes (served %d)", res.BytesFetched, srv.TotalServed())
	}
	for _, rq := range srv.Requests() {
		if !strings.Contains(rq.Path, "/revision/") {
			t.Errorf("re-run asked %s %s", rq.Method, rq.Path)
		}
	}
	for _, f := range res.Files {
		if f.Action != ActionPresent {
			t.Errorf("%s: %s", f.Path, f.Action)
		}
	}
	// A snapshot entry removed is relinked to its blob without a fetch.
	os.Remove(filepath.Join(cache, "models--dgq-test--fake-model", "snapshots", res.Commit, pConfig))
	srv.ResetStats()
	res, err = Download(context.Background(), fast(Options{Revision: res.Commit}))
	if err != nil || srv.TotalServed() != 0 || len(srv.Requests()) != 0 {
		t.Fatalf("relink: %v, served %d, %d requests", err, srv.TotalServed(), len(srv.Requests()))
	}
	i := slices.IndexFunc(res.Files, func(f FileResult) bool { return f.Path == pConfig })
	if res.Files[i].Action != ActionLinked {
		t.Errorf("action %s", res.Files[i].Action)
	}
}

// TestOffline: HF_HUB_OFFLINE reports a complete cached snapshot without
// any request and refuses anything else.
func TestOffline(t *testing.T) {
	srv, cache := newHub(t)
	if _, err := Download(context.Background(), fast(Options{})); err != nil {
		t.Fatal(err)
	}
	srv.ResetStats()
	t.Setenv("HF_HUB_OFFLINE", "1")
	res, err := Download(context.Background(), fast(Options{}))
	if err != nil || !res.Offline || !res.Complete || len(res.Files) != len(allPaths()) || res.BytesFetched != 0 {
		t.Fatalf("offline: %+v %v", res, err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("offline made %d requests", n)
	}
	res, err = Download(context.Background(), fast(Options{Include: []string{"*.json"}}))
	if err != nil || len(res.Files) != 2 {
		t.Fatalf("offline with --include: %v %v", res, err)
	}
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"unknown revision", Options{Revision: "v9"}},
		{"unknown repo", Options{Repo: "dgq-test/other"}},
	} {
		if _, err := Download(context.Background(), fast(c.opts)); !errors.Is(err, ErrOffline) || errclass.Of(err) != errclass.Stale {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
	repoDir := filepath.Join(cache, "models--dgq-test--fake-model")
	os.Remove(filepath.Join(repoDir, "snapshots", res.Commit, pNested))
	if _, err := Download(context.Background(), fast(Options{})); !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), pNested) {
		t.Errorf("incomplete snapshot: err = %v", err)
	}
	// Without the tree cache completeness cannot be told: what is there is
	// reported.
	os.RemoveAll(filepath.Join(repoDir, "trees"))
	res, err = Download(context.Background(), fast(Options{}))
	if err != nil || res.Complete || len(res.Files) != len(allPaths())-1 {
		t.Fatalf("no tree cache: %+v %v", res, err)
	}
	if i := slices.IndexFunc(res.Files, func(f FileResult) bool { return f.Path == pModel }); i < 0 || !res.Files[i].LFS || res.Files[i].SHA256 != hubtest.SHA256(fileData(pModel)) {
		t.Errorf("offline file result %+v", res.Files)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("offline made %d requests", n)
	}
}

// TestCancel: canceling stops every transfer promptly, keeps the partial
// files, publishes nothing half-written; the next run resumes and fetches
// only the rest.
func TestCancel(t *testing.T) {
	srv, cache := newHub(t)
	stalled := make(chan struct{})
	srv.SetFault(testRepo, pBig, &hubtest.Fault{StallAfter: 20000, Stalled: stalled})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Download(ctx, fast(Options{Stall: time.Minute}))
		done <- err
	}()
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the transfer never started")
	}
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Download did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) || errclass.Of(err) != errclass.Interrupted || time.Since(t0) > 2*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(t0))
	}
	repoDir := filepath.Join(cache, "models--dgq-test--fake-model")
	etag := hubtest.SHA256(fileData(pBig))
	inc := filepath.Join(repoDir, "blobs", etag+".incomplete")
	if fi, err := os.Stat(inc); err != nil || fi.Size() == 0 {
		t.Fatalf("partial file: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(repoDir, "blobs", etag)); err == nil {
		t.Fatal("blob published")
	}
	if _, err := os.Lstat(filepath.Join(repoDir, "snapshots", srv.CommitOf(testRepo), filepath.FromSlash(pBig))); err == nil {
		t.Fatal("symlink published")
	}
	if _, err := os.Lstat(filepath.Join(repoDir, "refs", "main")); err == nil {
		t.Fatal("ref published")
	}
	first := srv.Served(testRepo, pBig)
	srv.SetFault(testRepo, pBig, nil)
	res, err := Download(context.Background(), fast(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := readLikeHF(t, cache, testRepo, "main", res.Commit, pBig, true); !bytes.Equal(got, fileData(pBig)) {
		t.Fatal("content differs")
	}
	if total := srv.Served(testRepo, pBig); total != bigSize {
		t.Errorf("served %d bytes over both runs (%d before the cancel) for a %d-byte file", total, first, bigSize)
	}
	noPartials(t, cache)
}

// TestLockWait: a blob another process is fetching (its lock held) is
// waited for, and a cancel while waiting returns at once.
func TestLockWait(t *testing.T) {
	srv, cache := newHub(t)
	lock := filepath.Join(cache, ".locks", "models--dgq-test--fake-model", hubtest.GitBlobID(fileData(pConfig))+".lock")
	unlock, err := lockFile(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Download(context.Background(), fast(Options{Include: []string{pConfig}}))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Download did not wait for the lock: %v", err)
	default:
	}
	if srv.TotalServed() != 0 {
		t.Fatal("fetched while another process holds the lock")
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	unlock, _ = lockFile(context.Background(), filepath.Join(cache, ".locks", "models--dgq-test--fake-model", hubtest.GitBlobID(fileData(pReadme))+".lock"))
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if _, err := Download(ctx, fast(Options{Include: []string{pReadme}})); !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 2*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(t0))
	}
}

// TestLocalDir lays files out as huggingface_hub's local_dir mode.
func TestLocalDir(t *testing.T) {
	srv, cache := newHub(t)
	dir := filepath.Join(t.TempDir(), "out")
	res, err := Download(context.Background(), fast(Options{LocalDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.Abs(dir); res.Snapshot != abs || !res.LocalDir {
		t.Fatalf("snapshot %s", res.Snapshot)
	}
	for _, p := range allPaths() {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))); !bytes.Equal(got, fileData(p)) {
			t.Errorf("%s differs", p)
		}
		meta, err := os.ReadFile(filepath.Join(dir, ".cache", "huggingface", "download", filepath.FromSlash(p)+".metadata"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseLocalMetadata(meta)
		etag := hubtest.GitBlobID(fileData(p))
		if isLFS(p) {
			etag = hubtest.SHA256(fileData(p))
		}
		if err != nil || m.Commit != res.Commit || m.ETag != etag || time.Since(time.Unix(int64(m.Timestamp), 0)) > time.Minute {
			t.Errorf("%s metadata %q: %+v %v", p, meta, m, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".cache", "huggingface", ".gitignore")); err != nil || string(b) != "*" {
		t.Errorf(".gitignore %q %v", b, err)
	}
	if readTreeCache(filepath.Join(dir, ".cache", "huggingface"), res.Commit) == nil {
		t.Error("no tree cache in the local dir")
	}
	if _, err := os.Stat(filepath.Join(cache, "models--dgq-test--fake-model")); err == nil {
		t.Error("--local-dir wrote into the hub cache")
	}
	noPartials(t, dir)

	srv.ResetStats()
	res, err = Download(context.Background(), fast(Options{LocalDir: dir}))
	if err != nil || srv.TotalServed() != 0 || res.BytesFetched != 0 {
		t.Fatalf("re-run: %v, served %d", err, srv.TotalServed())
	}
	// A file changed locally is fetched again.
	os.WriteFile(filepath.Join(dir, pConfig), []byte("edited"), 0o644)
	srv.ResetStats()
	if _, err := Download(context.Background(), fast(Options{LocalDir: dir})); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, pConfig)); !bytes.Equal(got, fileData(pConfig)) || srv.TotalServed() != int64(len(fileData(pConfig))) {
		t.Errorf("edited file: %q, served %d", got, srv.TotalServed())
	}

	// With the blobs in the hub cache, a new local dir copies them.
	if _, err := Download(context.Background(), fast(Options{})); err != nil {
		t.Fatal(err)
	}
	srv.ResetStats()
	dir2 := filepath.Join(t.TempDir(), "out2")
	res, err = Download(context.Background(), fast(Options{LocalDir: dir2}))
	if err != nil || srv.TotalServed() != 0 {
		t.Fatalf("copy from cache: %v, served %d", err, srv.TotalServed())
	}
	for _, f := range res.Files {
		if f.Action != ActionCopied {
			t.Errorf("%s: %s", f.Path, f.Action)
		}
	}
}

// TestDiskFull: too little free space is refused before anything is
// fetched.
func TestDiskFull(t *testing.T) {
	srv, cache := newHub(t)
	old := diskFree
	diskFree = func(string) (int64, bool) { return 1000, true }
	defer func() { diskFree = old }()
	_, err := Download(context.Background(), fast(Options{}))
	if !errors.Is(err, ErrDiskFull) || errclass.Of(err) != errclass.IO || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	if srv.TotalServed() != 0 {
		t.Error("bytes fetched before the space check")
	}
	noPartials(t, cache)
}

// TestOptionErrors: malformed requests are usage errors.
func TestOptionErrors(t *testing.T) {
	_, cache := newHub(t)
	cases := []struct {
		name string
		opts Options
	}{
		{"bad repo", Options{Repo: "not a repo"}},
		{"path-like repo", Options{Repo: "./x"}},
		{"bad revision", Options{Revision: "-x"}},
		{"revision twice", Options{Repo: testRepo + "@main", Revision: "v1.0"}},
		{"local dir in cache", Options{LocalDir: filepath.Join(cache, "x")}},
		{"endpoint", Options{Endpoint: "ftp://example.com"}},
		{"negative connections", Options{Connections: -1}},
		{"too many connections", Options{Connections: MaxConnections + 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Download(context.Background(), fast(c.opts))
			if !errors.Is(err, ErrOptions) || errclass.Of(err) != errclass.Usage || !errors.Is(err, hfcache.ErrRepoRef) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// The same revision twice is fine.
	if _, err := Download(context.Background(), fast(Options{Repo: testRepo + "@v1.0", Revision: "v1.0", Include: []string{pReadme}})); err != nil {
		t.Fatal(err)
	}
}

// TestRefs: the revision's ref is written (last) and moved when the
// branch moves.
func TestRefs(t *testing.T) {
	srv, cache := newHub(t)
	res, err := Download(context.Background(), fast(Options{Include: []string{pReadme}}))
	if err != nil {
		t.Fatal(err)
	}
	r2 := hubtest.Repo{ID: testRepo, Commit: strings.Repeat("c", 40), Files: []hubtest.File{{Path: pReadme, Data: []byte("v2\n")}}}
	srv.AddRepo(r2)
	res2, err := Download(context.Background(), fast(Options{}))
	if err != nil || res2.Commit == res.Commit {
		t.Fatal(err)
	}
	ref, _ := os.ReadFile(filepath.Join(cache, "models--dgq-test--fake-model", "refs", "main"))
	if string(ref) != r2.Commit {
		t.Fatalf("refs/main = %q", ref)
	}
	// The old snapshot is still there.
	if _, err := os.Stat(filepath.Join(cache, "models--dgq-test--fake-model", "snapshots", res.Commit, pReadme)); err != nil {
		t.Error(err)
	}
}
