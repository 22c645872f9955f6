package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache/hub/hubtest"
)

// downloadEnv points the HF_* variables at a fake Hub and a fresh cache.
func downloadEnv(t *testing.T, srv *hubtest.Server) string {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "hub")
	for k, v := range map[string]string{
		"DGQ_HF_HOME": "", "HF_HUB_CACHE": cache, "HUGGINGFACE_HUB_CACHE": "", "HF_HOME": filepath.Join(t.TempDir(), "hfhome"),
		"XDG_CACHE_HOME": "", "HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": "",
		"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "", "HF_ENDPOINT": srv.URL(),
	} {
		t.Setenv(k, v)
	}
	return cache
}

// tinyHubRepo is the embedded tiny checkpoint as a Hub repository: the
// safetensors shards in LFS, the rest regular files, at the commit its
// hub.json records.
func tinyHubRepo(t *testing.T) hubtest.Repo {
	t.Helper()
	h := testmodel.HubInfo()
	r := hubtest.Repo{ID: h.Repo, Commit: h.Revision}
	for _, name := range testmodel.FileNames() {
		b, err := testmodel.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		r.Files = append(r.Files, hubtest.File{Path: name, Data: b, LFS: strings.HasSuffix(name, ".safetensors")})
	}
	return r
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestDownloadCLI: the snapshot folder is the last line of stdout, --json
// prints one object with its keys, and failures exit with their class's
// code and one line.
func TestDownloadCLI(t *testing.T) {
	const token = "hf_cli_token"
	srv := hubtest.New(
		hubtest.Repo{ID: "org/plain", Refs: []string{"v1"}, Files: []hubtest.File{
			{Path: "config.json", Data: []byte(`{"a":1}`)},
			{Path: "sub/dir/file.txt", Data: []byte("hello\n")},
			{Path: "weights.safetensors", Data: []byte(strings.Repeat("w", 5000)), LFS: true},
		}},
		hubtest.Repo{ID: "org/gated", Token: token, Files: []hubtest.File{{Path: "config.json", Data: []byte("{}")}}},
		hubtest.Repo{ID: "org/corrupt", Files: []hubtest.File{{Path: "x.bin", Data: []byte("payload"), LFS: true}}},
	)
	defer srv.Close()
	srv.SetFault("org/corrupt", "x.bin", &hubtest.Fault{Corrupt: true})
	cache := downloadEnv(t, srv)
	commit := srv.CommitOf("org/plain")
	snap := filepath.Join(cache, "models--org--plain", "snapshots", commit)

	r := dgqRun("download", "org/plain")
	if r.code != 0 {
		t.Fatalf("download: %d %s", r.code, r.stderr)
	}
	if got := lastLine(r.stdout); got != snap {
		t.Fatalf("last line %q, want %q", got, snap)
	}
	if b, err := os.ReadFile(filepath.Join(snap, "sub", "dir", "file.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("file: %q %v", b, err)
	}
	if r.stderr != "" {
		t.Errorf("stderr not empty off a terminal: %q", r.stderr)
	}

	r = dgqRun("download", "org/plain@v1", "--include", "*.json", "--json")
	var out map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("--json: %d %q %s", r.code, r.stdout, r.stderr)
	}
	for _, k := range []string{"repo", "revision", "commit", "snapshot", "local_dir", "offline", "complete", "files", "bytes_fetched", "bytes_total", "elapsed_s"} {
		if _, ok := out[k]; !ok {
			t.Errorf("--json lacks %q", k)
		}
	}
	assertKeysDocumented(t, readCLIDoc(t), "download", r.stdout) // docs/cli.md names every key
	if out["snapshot"] != snap || out["revision"] != "v1" || out["commit"] != commit {
		t.Errorf("--json values: %v", out)
	}
	files := out["files"].([]any)
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	f := files[0].(map[string]any)
	for _, k := range []string{"path", "size", "lfs", "etag", "fetched", "action"} {
		if _, ok := f[k]; !ok {
			t.Errorf("file entry lacks %q", k)
		}
	}
	if f["path"] != "config.json" || f["action"] != "present" || f["fetched"].(float64) != 0 {
		t.Errorf("file entry %v", f)
	}

	dir := filepath.Join(t.TempDir(), "local")
	r = dgqRun("download", "org/plain", "--local-dir", dir, "--exclude", "sub/")
	if abs, _ := filepath.Abs(dir); r.code != 0 || lastLine(r.stdout) != abs {
		t.Fatalf("--local-dir: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "weights.safetensors")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); err == nil {
		t.Error("--exclude sub/ ignored")
	}

	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		code    int
		mention string
	}{
		{"gated", []string{"download", "org/gated"}, nil, exitUsage, "hf auth login"},
		{"gated, wrong token", []string{"download", "org/gated"}, map[string]string{"HF_TOKEN": "nope"}, exitUsage, "https://"},
		{"unknown repo", []string{"download", "org/missing"}, nil, exitUsage, "org/missing"},
		{"unknown revision", []string{"download", "org/plain", "--revision", "v9"}, nil, exitUsage, "v9"},
		{"no file matches", []string{"download", "org/plain", "--include", "*.gguf"}, nil, exitUsage, "--include"},
		{"revision twice", []string{"download", "org/plain@v1", "--revision", "main"}, nil, exitUsage, "revision given twice"},
		{"bad repo", []string{"download", "not a repo"}, nil, exitUsage, "ORG/NAME"},
		{"no repo", []string{"download"}, nil, exitUsage, "download"},
		{"corrupt", []string{"download", "org/corrupt"}, nil, exitInvalid, "x.bin"},
		{"offline, not cached", []string{"download", "org/gated"}, map[string]string{"HF_HUB_OFFLINE": "1"}, exitStale, "HF_HUB_OFFLINE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			r := dgqRun(c.args...)
			if c.name == "gated, wrong token" {
				c.mention = srv.URL() + "/org/gated"
			}
			assertOneLineError(t, r, c.code, c.mention)
			rj := dgqRun(append(c.args, "--json")...)
			var e jsonError
			if json.Unmarshal([]byte(rj.stdout), &e) != nil || e.Error.Code != c.code {
				t.Errorf("--json error: %q", rj.stdout)
			}
		})
	}
	t.Run("gated, with token", func(t *testing.T) {
		t.Setenv("HF_TOKEN", token)
		if r := dgqRun("download", "org/gated"); r.code != 0 {
			t.Fatalf("%d %s", r.code, r.stderr)
		}
	})
	t.Run("offline, cached", func(t *testing.T) {
		t.Setenv("HF_HUB_OFFLINE", "1")
		srv.ResetStats()
		r := dgqRun("download", "org/plain")
		if r.code != 0 || lastLine(r.stdout) != snap || len(srv.Requests()) != 0 {
			t.Fatalf("%d %q %s (%d requests)", r.code, r.stdout, r.stderr, len(srv.Requests()))
		}
	})
}

// TestDownloadThenQuantizeAndAudit: the embedded tiny checkpoint served as
// a Hub repository downloads into the cache with huggingface_hub's blob
// names (those hub.json records, from a real hf download), and dgq
// quantize -m ORG/NAME then dgq audit work on it.
func TestDownloadThenQuantizeAndAudit(t *testing.T) {
	srv := hubtest.New(tinyHubRepo(t))
	defer srv.Close()
	srv.PageSize = 4
	cache := downloadEnv(t, srv)
	h := testmodel.HubInfo()

	r := dgqRun("download", h.Repo)
	if r.code != 0 {
		t.Fatalf("download: %d %s", r.code, r.stderr)
	}
	snap := filepath.Join(cache, "models--"+strings.ReplaceAll(h.Repo, "/", "--"), "snapshots", h.Revision)
	if lastLine(r.stdout) != snap {
		t.Fatalf("last line %q, want %q", lastLine(r.stdout), snap)
	}
	for name, blob := range h.Blobs {
		target, err := os.Readlink(filepath.Join(snap, name))
		if err != nil || target != filepath.Join("..", "..", "blobs", blob) {
			t.Errorf("%s -> %q (%v), want ../../blobs/%s", name, target, err, blob)
		}
	}
	out := filepath.Join(t.TempDir(), "pack")
	if r := dgqRun("quantize", "--profile", "q4", "-m", h.Repo, "-o", out); r.code != 0 {
		t.Fatalf("quantize: %d %s", r.code, r.stderr)
	}
	if r := dgqRun("audit", out); r.code != 0 {
		t.Fatalf("audit: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// Downloading again fetches nothing.
	srv.ResetStats()
	if r := dgqRun("download", h.Repo, "--json"); r.code != 0 || srv.TotalServed() != 0 || !strings.Contains(r.stdout, `"bytes_fetched": 0`) {
		t.Fatalf("re-run: %d %q, served %d", r.code, r.stdout, srv.TotalServed())
	}
}
