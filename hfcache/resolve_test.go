package hfcache

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// hubCache lays the tiny checkpoint out as a hub cache under a fresh
// folder and returns the root, the repo folder and the snapshot folder.
// It skips where symlinks cannot be created.
func hubCache(t *testing.T) (root, repoDir, snap string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("symlinks")
	}
	root = filepath.Join(t.TempDir(), "hub")
	snap, err := testmodel.WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, filepath.Dir(filepath.Dir(snap)), snap
}

// clearEnv empties every variable CacheRoot reads (empty counts as unset).
func clearEnv(t *testing.T) {
	for _, v := range []string{EnvDGQHFHome, EnvHFHubCache, EnvHFHubCacheLegacy, EnvHFHome, EnvXDGCacheHome} {
		t.Setenv(v, "")
	}
}

// checkLine checks the error conventions: one line, "hfcache: " prefix.
func checkLine(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "hfcache: ") {
		t.Errorf("error %q is not one line prefixed hfcache:", msg)
	}
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCacheRoot(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	all := map[string]string{
		EnvDGQHFHome:        "/d/dgq",
		EnvHFHubCache:       "/d/hubcache",
		EnvHFHubCacheLegacy: "/d/legacy",
		EnvHFHome:           "/d/hfhome",
		EnvXDGCacheHome:     "/d/xdg",
	}
	order := []string{EnvDGQHFHome, EnvHFHubCache, EnvHFHubCacheLegacy, EnvHFHome, EnvXDGCacheHome}
	want := map[string]string{
		EnvDGQHFHome:        "/d/dgq",
		EnvHFHubCache:       "/d/hubcache",
		EnvHFHubCacheLegacy: "/d/legacy",
		EnvHFHome:           "/d/hfhome/hub",
		EnvXDGCacheHome:     "/d/xdg/huggingface/hub",
		SourceDefault:       filepath.Join(home, ".cache", "huggingface", "hub"),
	}
	// Every suffix of the precedence list set (and every single variable
	// alone): the first one set wins.
	type tc struct {
		name       string
		set        map[string]string
		dir, sourc string
	}
	var cases []tc
	for i := range order {
		set := map[string]string{}
		for _, v := range order[i:] {
			set[v] = all[v]
		}
		cases = append(cases, tc{"from " + order[i], set, want[order[i]], order[i]})
		cases = append(cases, tc{"only " + order[i], map[string]string{order[i]: all[order[i]]}, want[order[i]], order[i]})
	}
	cases = append(cases,
		tc{"nothing set", nil, want[SourceDefault], SourceDefault},
		tc{"HF_HOME beats XDG", map[string]string{EnvHFHome: "/a", EnvXDGCacheHome: "/b"}, "/a/hub", EnvHFHome},
		tc{"legacy loses to HF_HUB_CACHE", map[string]string{EnvHFHubCacheLegacy: "/a", EnvHFHubCache: "/b"}, "/b", EnvHFHubCache},
		tc{"DGQ_HF_HOME is the cache itself", map[string]string{EnvDGQHFHome: "/x/", EnvHFHome: "/y"}, "/x", EnvDGQHFHome},
		tc{"tilde", map[string]string{EnvHFHome: "~/hf"}, filepath.Join(home, "hf", "hub"), EnvHFHome},
		tc{"tilde alone", map[string]string{EnvHFHubCache: "~"}, home, EnvHFHubCache},
		tc{"no tilde-user expansion", map[string]string{EnvHFHubCache: "~bob/c"}, "~bob/c", EnvHFHubCache},
		tc{"relative kept", map[string]string{EnvHFHubCache: "rel/./c"}, "rel/c", EnvHFHubCache},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("HOME", home)
			for k, v := range c.set {
				t.Setenv(k, v)
			}
			dir, source := CacheRoot()
			if dir != filepath.FromSlash(c.dir) || source != c.sourc {
				t.Errorf("CacheRoot() = %q, %q; want %q, %q", dir, source, c.dir, c.sourc)
			}
		})
	}
}

func TestParseRepoRef(t *testing.T) {
	const hex = "908e7097997c140d18cca0ed34c0edf38e091034"
	good := []struct {
		in   string
		want RepoRef
	}{
		{"org/name", RepoRef{"org", "name"}},
		{"org/name@main", RepoRef{"org", "name"}},
		{"org/name@" + hex, RepoRef{"org", "name"}},
		{"google/gemma-3-4b-it@v1.0", RepoRef{"google", "gemma-3-4b-it"}},
		{"a_b/c.d@refs/pr/1", RepoRef{"a_b", "c.d"}},
		{"A1/B_@feature/x+y", RepoRef{"A1", "B_"}},
	}
	for _, g := range good {
		got, ok := ParseRepoRef(g.in)
		repo, rev, _ := strings.Cut(g.in, "@")
		if !ok || got.Repo != repo || got.Revision != rev {
			t.Errorf("ParseRepoRef(%q) = %+v, %v", g.in, got, ok)
		}
		if got.String() != g.in {
			t.Errorf("String() = %q, want %q", got.String(), g.in)
		}
	}
	if r, _ := ParseRepoRef("org/name"); r.rev() != "main" {
		t.Errorf("default revision %q", r.rev())
	}
	bad := []string{
		"", "org", "org/", "/name", "/abs/path", "./x", "../x", "x/..", "./org/name", "a/b/c", "org//name",
		"org/name@", "@main", "org/name@main@x", "org/name@/main", "org/name@main/", "org/name@a//b",
		"org/name@.hidden", "org/name@a/../b", "org/name@-x", "org/name@x.lock", "org/name@a b",
		"org/name@a\\b", "org/name@a:b", "org/name@a~1", "org/na me", "org/name\n", "-org/name", "org/name-",
		"org/.name", "o--rg/name", "org/na..me", "org\\name", "C:\\x\\y", "org/näme", "hf://org/name",
		"org/" + strings.Repeat("n", 100),
	}
	for _, s := range bad {
		if got, ok := ParseRepoRef(s); ok {
			t.Errorf("ParseRepoRef(%q) = %+v, true; want false", s, got)
		}
	}
}

func TestDetect(t *testing.T) {
	const hex = "908e7097997c140d18cca0ed34c0edf38e091034"
	snap := "/c/hub/models--org--name/snapshots/" + hex
	cases := []struct {
		path, repo, rev, root, rel string
	}{
		{snap, "org/name", hex, "/c/hub", ""},
		{snap + "/", "org/name", hex, "/c/hub", ""},
		{snap + "/config.json", "org/name", hex, "/c/hub", "config.json"},
		{snap + "/sub/dir/file.bin", "org/name", hex, "/c/hub", "sub/dir/file.bin"},
		{snap + "/./x/../config.json", "org/name", hex, "/c/hub", "config.json"},
		{"/models--a--b/snapshots/" + hex, "a/b", hex, "/", ""},
		{"/x/models--a--b/snapshots/" + hex + "/models--c--d/snapshots/" + strings.Repeat("0", 40) + "/f", "c/d", strings.Repeat("0", 40), "/x/models--a--b/snapshots/" + hex, "f"},
		{"/c/models--Org_1--na.me-2/snapshots/" + hex, "Org_1/na.me-2", hex, "/c", ""},
	}
	for _, c := range cases {
		root, repo, rev, rel, ok := detect(filepath.FromSlash(c.path))
		if !ok || repo != c.repo || rev != c.rev || root != filepath.FromSlash(c.root) || rel != c.rel {
			t.Errorf("detect(%q) = %q %q %q %q %v", c.path, root, repo, rev, rel, ok)
		}
		if repo2, rev2, ok2 := Detect(filepath.FromSlash(c.path)); repo2 != repo || rev2 != rev || ok2 != ok {
			t.Errorf("Detect(%q) disagrees", c.path)
		}
	}
	bad := []string{
		"", "/", "/c/hub", "/c/hub/models--org--name", "/c/hub/models--org--name/snapshots",
		"/c/hub/models--org--name/refs/main", "/c/hub/models--org--name/blobs/" + hex,
		"/c/hub/models--org--name/snapshots/" + hex[:39],
		"/c/hub/models--org--name/snapshots/" + strings.ToUpper(hex),
		"/c/hub/models--org--name/snapshots/" + hex + "0",
		"/c/hub/models--org--name/snapshots/main",
		"/c/hub/models--org/snapshots/" + hex,
		"/c/hub/models--org--na--me/snapshots/" + hex,
		"/c/hub/models--org--/snapshots/" + hex,
		"/c/hub/models----name/snapshots/" + hex,
		"/c/hub/models-org--name/snapshots/" + hex,
		"/c/hub/datasets--org--name/snapshots/" + hex,
		"/c/hub/spaces--org--name/snapshots/" + hex,
		"/c/hub/models--o rg--name/snapshots/" + hex,
		"/c/hub/models--org--name/x/snapshots/" + hex,
		"/c/hub/models--org--name/snapshots/" + hex + "/../other",
		"/tmp/plain/folder/config.json",
		"relative/path",
		"a\x00b",
	}
	for _, p := range bad {
		if repo, rev, ok := Detect(filepath.FromSlash(p)); ok {
			t.Errorf("Detect(%q) = %q, %q, true; want false", p, repo, rev)
		}
	}

	// A relative path is made absolute first.
	dir := filepath.Join(t.TempDir(), "models--org--name", "snapshots", hex)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if repo, rev, ok := Detect("config.json"); !ok || repo != "org/name" || rev != hex {
		t.Errorf("Detect(relative) = %q, %q, %v", repo, rev, ok)
	}
	if repo, _, ok := Detect("."); !ok || repo != "org/name" {
		t.Errorf("Detect(.) = %q, %v", repo, ok)
	}
}

func TestResolve(t *testing.T) {
	hub := testmodel.HubInfo()
	const other = "0123456789abcdef0123456789abcdef01234567"
	repo := hub.Repo
	cases := []struct {
		name    string
		setup   func(t *testing.T, repoDir string)
		ref     RepoRef
		ref2    string // want Resolved.Ref
		err     error
		msg     []string
		emptyRt bool
	}{
		{name: "default branch", ref: RepoRef{Repo: repo}, ref2: "main"},
		{name: "branch main", ref: RepoRef{repo, "main"}, ref2: "main"},
		{name: "ref file with newline", ref: RepoRef{repo, "v1"}, ref2: "v1", setup: func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, "refs", "v1"), hub.Revision+"\n")
		}},
		{name: "tag", ref: RepoRef{repo, "v1.0"}, ref2: "v1.0", setup: func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, "refs", "v1.0"), hub.Revision)
		}},
		{name: "pr ref", ref: RepoRef{repo, "refs/pr/1"}, ref2: "refs/pr/1", setup: func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, "refs", "refs", "pr", "1"), hub.Revision)
		}},
		{name: "full commit", ref: RepoRef{repo, hub.Revision}, ref2: ""},
		{name: "full commit without refs folder", ref: RepoRef{repo, hub.Revision}, ref2: "", setup: func(t *testing.T, d string) {
			os.RemoveAll(filepath.Join(d, "refs"))
		}},
		{name: "unknown branch", ref: RepoRef{repo, "dev"}, err: ErrNotInCache,
			msg: []string{repo + ": revision dev is not in the hub cache", "no refs/dev, cached refs: main;", "; fix: dgq download " + repo + " --revision dev"}},
		{name: "unknown repo", ref: RepoRef{Repo: "dgq-test/other"}, err: ErrNotInCache,
			msg: []string{"repo dgq-test/other is not in the hub cache", "; fix: dgq download dgq-test/other --revision main"}},
		{name: "unknown repo with revision", ref: RepoRef{"dgq-test/other", "v2"}, err: ErrNotInCache,
			msg: []string{"fix: dgq download dgq-test/other --revision v2"}},
		{name: "commit without snapshot folder", ref: RepoRef{repo, other}, err: ErrNotInCache,
			msg: []string{"commit " + other + " has no snapshot folder", "fix: dgq download " + repo + " --revision " + other}},
		{name: "branch naming a commit without snapshot", ref: RepoRef{repo, "old"}, err: ErrNotInCache,
			setup: func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "refs", "old"), other) },
			msg:   []string{"revision old (commit " + other + ", from refs/old) has no snapshot folder", "fix: dgq download " + repo + " --revision old"}},
		{name: "snapshot folder is a file", ref: RepoRef{repo, other}, err: ErrNotInCache,
			setup: func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "snapshots", other), "") }},
		{name: "corrupt ref", ref: RepoRef{repo, "bad"}, err: ErrNotInCache,
			setup: func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "refs", "bad"), "not a commit\n") },
			msg:   []string{`holds "not a commit", not a 40-hex commit`, "fix: dgq download " + repo + " --revision bad"}},
		{name: "huge ref", ref: RepoRef{repo, "big"}, err: ErrNotInCache,
			setup: func(t *testing.T, d string) {
				writeFile(t, filepath.Join(d, "refs", "big"), strings.Repeat("a", 1<<16))
			}},
		{name: "upper-case commit is not a commit", ref: RepoRef{repo, strings.ToUpper(hub.Revision)}, err: ErrNotInCache},
		{name: "ref is a folder", ref: RepoRef{repo, "refs"}, err: ErrNotInCache,
			setup: func(t *testing.T, d string) { os.MkdirAll(filepath.Join(d, "refs", "refs", "pr"), 0o755) },
			msg:   []string{"no refs/refs"}},
		{name: "repo folder is a file", ref: RepoRef{Repo: "dgq-test/file"}, err: ErrNotInCache,
			setup: func(t *testing.T, d string) {
				writeFile(t, filepath.Join(filepath.Dir(d), "models--dgq-test--file"), "")
			}},
		{name: "malformed repo", ref: RepoRef{Repo: "../x"}, err: ErrRepoRef},
		{name: "malformed revision", ref: RepoRef{repo, "../../x"}, err: ErrRepoRef},
		{name: "no root", ref: RepoRef{Repo: repo}, err: ErrNotInCache, emptyRt: true, msg: []string{"cannot locate the hub cache"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, repoDir, snap := hubCache(t)
			if c.setup != nil {
				c.setup(t, repoDir)
			}
			if c.emptyRt {
				root = ""
			}
			r, err := Resolve(root, c.ref)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				checkLine(t, err)
				for _, m := range c.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q lacks %q", err, m)
					}
				}
				if c.err == ErrNotInCache && !strings.Contains(err.Error(), "; fix: dgq download ") {
					t.Errorf("error %q has no fix", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Resolved{Root: root, Repo: repo, Revision: hub.Revision, Ref: c.ref2, Dir: snap}
			if *r != want {
				t.Errorf("Resolve = %+v, want %+v", *r, want)
			}
			s := openT(t, r.Dir)
			if len(s.Tensors()) != tinyTensors {
				t.Errorf("%d tensors", len(s.Tensors()))
			}
		})
	}
}

// TestResolveRealFiles: a snapshot written with HF_HUB_DISABLE_SYMLINKS
// holds copies, not links; it resolves and opens the same way.
func TestResolveRealFiles(t *testing.T) {
	root, _, snap := hubCache(t)
	entries, err := os.ReadDir(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(snap, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	hub := testmodel.HubInfo()
	os.RemoveAll(filepath.Join(filepath.Dir(filepath.Dir(snap)), "blobs"))
	r, err := Resolve(root, RepoRef{Repo: hub.Repo})
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != snap || r.Revision != hub.Revision {
		t.Errorf("%+v", r)
	}
	s := openT(t, r.Dir)
	if len(s.Tensors()) != tinyTensors {
		t.Errorf("%d tensors", len(s.Tensors()))
	}
}

// TestMissingFileHints: files missing from a cache snapshot (a blob
// deleted under its symlink, a link removed, a folder gone) are reported
// with the download command naming them.
func TestMissingFileHints(t *testing.T) {
	hub := testmodel.HubInfo()
	const shard = "model-00002-of-00004.safetensors"
	fix := "; fix: dgq download " + hub.Repo + " --revision " + hub.Revision
	cases := []struct {
		name  string
		setup func(t *testing.T, repoDir, snap string)
		open  func(snap string) error
		msg   []string
	}{
		{name: "dangling shard symlink", setup: func(t *testing.T, repoDir, snap string) {
			os.Remove(filepath.Join(repoDir, "blobs", hub.Blobs[shard]))
		}, msg: []string{shard + " is a dangling symlink to ../../blobs/" + hub.Blobs[shard], fix + " --include " + shard}},
		{name: "shard link removed", setup: func(t *testing.T, repoDir, snap string) {
			os.Remove(filepath.Join(snap, shard))
		}, msg: []string{shard + " does not exist" + fix + " --include " + shard}},
		{name: "dangling index", setup: func(t *testing.T, repoDir, snap string) {
			os.Remove(filepath.Join(repoDir, "blobs", hub.Blobs[IndexFile]))
		}, msg: []string{"dangling", fix + " --include " + IndexFile}},
		{name: "no index", setup: func(t *testing.T, repoDir, snap string) {
			os.Remove(filepath.Join(snap, IndexFile))
		}, msg: []string{"holds neither", fix}},
		{name: "dangling config", setup: func(t *testing.T, repoDir, snap string) {
			os.Remove(filepath.Join(repoDir, "blobs", hub.Blobs["config.json"]))
		}, open: func(snap string) error {
			s, err := OpenSnapshot(snap)
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.ReadFile("config.json", 1<<20)
			return err
		}, msg: []string{fix + " --include config.json"}},
		{name: "snapshot folder gone", setup: func(t *testing.T, repoDir, snap string) {
			os.RemoveAll(snap)
		}, msg: []string{"does not exist" + fix}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, repoDir, snap := hubCache(t)
			c.setup(t, repoDir, snap)
			open := c.open
			if open == nil {
				open = func(snap string) error {
					s, err := OpenSnapshot(snap)
					if err == nil {
						s.Close()
					}
					return err
				}
			}
			err := open(snap)
			if !errors.Is(err, ErrMissingFile) {
				t.Fatalf("err = %v, want ErrMissingFile", err)
			}
			checkLine(t, err)
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
			if !strings.HasSuffix(err.Error(), c.msg[len(c.msg)-1]) {
				t.Errorf("error %q does not end with the fix", err)
			}
		})
	}

	// Outside a cache layout there is no hint.
	dir := t.TempDir()
	if _, err := OpenSnapshot(dir); !errors.Is(err, ErrMissingFile) || strings.Contains(err.Error(), "fix:") {
		t.Errorf("plain folder: %v", err)
	}
}

func TestResolveSource(t *testing.T) {
	hub := testmodel.HubInfo()
	root, _, snap := hubCache(t)
	flat, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "flat"))
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(snap, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	clearEnv(t)
	t.Setenv(EnvHFHubCache, "/nonexistent/elsewhere")
	t.Setenv(EnvDGQHFHome, root)

	cases := []struct {
		in   string
		want Resolved
		err  error
		msg  []string
	}{
		{in: flat, want: Resolved{Dir: flat}},
		{in: snap, want: Resolved{Root: root, Repo: hub.Repo, Revision: hub.Revision, Dir: snap}},
		{in: snap + "/", want: Resolved{Root: root, Repo: hub.Repo, Revision: hub.Revision, Dir: snap + "/"}},
		{in: link, want: Resolved{Root: root, Repo: hub.Repo, Revision: hub.Revision, Dir: link}},
		{in: hub.Repo, want: Resolved{Root: root, Repo: hub.Repo, Revision: hub.Revision, Ref: "main", Dir: snap}},
		{in: hub.Repo + "@main", want: Resolved{Root: root, Repo: hub.Repo, Revision: hub.Revision, Ref: "main", Dir: snap}},
		{in: hub.Repo + "@" + hub.Revision, want: Resolved{Root: root, Repo: hub.Repo, Revision: hub.Revision, Dir: snap}},
		{in: "dgq-test/missing", err: ErrNotInCache, msg: []string{
			"repo dgq-test/missing is not in the hub cache " + root + " (from DGQ_HF_HOME), nor a local folder; fix: dgq download dgq-test/missing --revision main"}},
		{in: hub.Repo + "@dev", err: ErrNotInCache, msg: []string{"(from DGQ_HF_HOME)", "fix: dgq download " + hub.Repo + " --revision dev"}},
		{in: "./nope", err: ErrMissingFile, msg: []string{"folder ./nope does not exist and is not org/name[@revision]"}},
		{in: "/abs/nope", err: ErrMissingFile},
		{in: "a/b/c", err: ErrMissingFile},
		{in: file, err: ErrMissingFile, msg: []string{"is not a folder"}},
		{in: "", err: ErrMissingFile},
	}
	for _, c := range cases {
		r, err := ResolveSource(c.in)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ResolveSource(%q): err = %v, want %v", c.in, err, c.err)
				continue
			}
			checkLine(t, err)
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("ResolveSource(%q): error %q lacks %q", c.in, err, m)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("ResolveSource(%q): %v", c.in, err)
			continue
		}
		if *r != c.want {
			t.Errorf("ResolveSource(%q) = %+v, want %+v", c.in, *r, c.want)
		}
	}

	// A local folder wins over a repo id of the same spelling.
	cwd := t.TempDir()
	t.Chdir(cwd)
	if err := os.MkdirAll(filepath.FromSlash(hub.Repo), 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := ResolveSource(hub.Repo); err != nil || r.Dir != hub.Repo || r.Repo != "" {
		t.Errorf("local folder named like the repo: %+v, %v", r, err)
	}

	// The default root: nothing set, HOME points at a folder whose
	// .cache/huggingface/hub holds the checkpoint.
	home := t.TempDir()
	hroot := filepath.Join(home, ".cache", "huggingface", "hub")
	if _, err := testmodel.WriteHubCache(hroot); err != nil {
		t.Fatal(err)
	}
	clearEnv(t)
	t.Setenv("HOME", home)
	r, err := ResolveSource(hub.Repo + "@main")
	if err != nil || r.Root != hroot || r.Revision != hub.Revision {
		t.Errorf("default root: %+v, %v", r, err)
	}
	if _, err := ResolveSource("dgq-test/missing"); err == nil || !strings.Contains(err.Error(), "(the default;") {
		t.Errorf("default root message: %v", err)
	}
}

func TestDownloadHint(t *testing.T) {
	cases := []struct {
		repo, rev string
		files     []string
		want      string
	}{
		{"org/name", "main", nil, "dgq download org/name --revision main"},
		{"org/name", "", nil, "dgq download org/name --revision main"},
		{"org/name", "v1.0", []string{"b.safetensors", "a.json", "b.safetensors", ""}, "dgq download org/name --revision v1.0 --include a.json --include b.safetensors"},
		{"org/name", "refs/pr/1", []string{"sub/x y.bin"}, "dgq download org/name --revision refs/pr/1 --include 'sub/x y.bin'"},
		{"org/name", "main", []string{"it's*"}, `dgq download org/name --revision main --include 'it'\''s*'`},
		{"org/name", "main", []string{"a\nb"}, `dgq download org/name --revision main --include "a\nb"`},
	}
	for _, c := range cases {
		if got := DownloadHint(c.repo, c.rev, c.files...); got != c.want {
			t.Errorf("DownloadHint(%q, %q, %q) = %q, want %q", c.repo, c.rev, c.files, got, c.want)
		}
	}

	r := Resolved{Repo: "org/name", Revision: "908e7097997c140d18cca0ed34c0edf38e091034", Ref: "main"}
	if got, want := r.HintFor("b", "a"), "dgq download org/name --revision 908e7097997c140d18cca0ed34c0edf38e091034 --include a --include b"; got != want {
		t.Errorf("HintFor = %q, want %q", got, want)
	}
	if got := (Resolved{Dir: "/x"}).HintFor("a"); got != "" {
		t.Errorf("HintFor outside a cache = %q", got)
	}
}

func TestStaleError(t *testing.T) {
	var err error = &StaleError{Path: "/c/shard.safetensors", What: "size 10 differs from the pinned 12", Hint: DownloadHint("org/name", "abc", "shard.safetensors")}
	want := "hfcache: /c/shard.safetensors: size 10 differs from the pinned 12; fix: dgq download org/name --revision abc --include shard.safetensors"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, ErrStale) || errors.Is(err, ErrMissingFile) {
		t.Errorf("errors.Is wrong for %v", err)
	}
	var se *StaleError
	if !errors.As(err, &se) || se.Path != "/c/shard.safetensors" {
		t.Errorf("errors.As: %+v", se)
	}
	if got := (&StaleError{Path: "p", What: "missing"}).Error(); got != "hfcache: p: missing" {
		t.Errorf("no hint: %q", got)
	}
	if got := (&StaleError{Path: "p\n", What: "a\nb"}).Error(); strings.Contains(got, "\n") {
		t.Errorf("not one line: %q", got)
	}
}

func TestIsInCache(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks")
	}
	base := t.TempDir()
	root := filepath.Join(base, "hub")
	snap, err := testmodel.WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	sibling := filepath.Join(base, "hub-other")
	os.MkdirAll(sibling, 0o755)
	into := filepath.Join(base, "into")
	if err := os.Symlink(root, into); err != nil {
		t.Fatal(err)
	}
	viaLink := filepath.Join(base, "rootlink")
	if err := os.Symlink(root, viaLink); err != nil {
		t.Fatal(err)
	}
	// Another cache elsewhere, not the configured root.
	otherSnap, err := testmodel.WriteHubCache(filepath.Join(base, "elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	clearEnv(t)
	t.Setenv(EnvDGQHFHome, root)

	cases := []struct {
		path string
		want bool
	}{
		{root, true},
		{root + "/", true},
		{snap, true},
		{filepath.Join(snap, "config.json"), true},
		{filepath.Join(root, "new", "out"), true},
		{filepath.Join(root, "a", "..", "b"), true},
		{filepath.Join(into, "x", "y"), true},
		{otherSnap, true},
		{filepath.Join(otherSnap, "out"), true},
		{sibling, false},
		{filepath.Join(sibling, "out"), false},
		{base, false},
		{filepath.Join(root, ".."), false},
		{filepath.Join(base, "elsewhere"), false},
		{"/", false},
		{"", false},
	}
	for _, c := range cases {
		if got := IsInCache(c.path); got != c.want {
			t.Errorf("IsInCache(%q) = %v, want %v", c.path, got, c.want)
		}
	}

	// The root given through a symlink: paths under the real folder count.
	t.Setenv(EnvDGQHFHome, viaLink)
	if !IsInCache(filepath.Join(root, "out")) || !IsInCache(filepath.Join(viaLink, "out")) {
		t.Error("root through a symlink")
	}
	// A relative path inside the cache.
	t.Chdir(root)
	if !IsInCache("out") || IsInCache("../out") {
		t.Error("relative paths")
	}
}
