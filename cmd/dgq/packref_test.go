package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
)

// cachedPack quantizes the tiny checkpoint from a hub cache and files the
// pack in that cache as the repo org/tiny-q4 at refs/main, as dgq download
// or hf download leave a pack repository. It returns the snapshot folder.
func cachedPack(t *testing.T) string {
	t.Helper()
	hub := filepath.Join(t.TempDir(), "hub")
	if _, err := testmodel.WriteHubCache(hub); err != nil {
		t.Fatal(err)
	}
	t.Setenv(hfcache.EnvDGQHFHome, hub)
	pack := filepath.Join(t.TempDir(), "q4")
	if r := dgqRun("quantize", "--profile", "q4", "-m", testmodel.HubInfo().Repo, "-o", pack); r.code != 0 {
		t.Fatalf("quantize: %s", r.stderr)
	}
	const commit = "c0ffee0000000000000000000000000000000001"
	repo := filepath.Join(hub, "models--org--tiny-q4")
	snap := filepath.Join(repo, "snapshots", commit)
	for _, d := range []string{filepath.Join(repo, "refs"), filepath.Dir(snap)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(pack, snap); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestPackByName: every command that takes a pack accepts ORG/NAME[@REV]
// from the hub cache; a pack repo that is not cached exits 4 naming the
// download, and a cached model that is not a pack exits 3.
func TestPackByName(t *testing.T) {
	snap := cachedPack(t)
	ok := [][]string{
		{"inspect", "org/tiny-q4"},
		{"inspect", "org/tiny-q4@main", "--json"},
		{"audit", "org/tiny-q4"},
		{"tokenize", "org/tiny-q4", "hello"},
		{"run", "org/tiny-q4", "--prompt", "hi", "--max-new-tokens", "4", "--max-steps", "2", "--seed", "1"},
		{"verify", "org/tiny-q4", "--windows", "1", "--prompt-len", "8", "--generations", "1", "--max-steps", "2"},
		{"bench", "org/tiny-q4", "--prompt-len", "8", "--canvas", "8", "--reps", "1"},
	}
	for _, args := range ok {
		r := dgqRun(args...)
		if r.code != 0 {
			t.Errorf("dgq %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := dgqRun("inspect", "org/tiny-q4"); !strings.Contains(r.stdout, "pack "+"org/tiny-q4") {
		t.Errorf("inspect names the pack as given: %.200s", r.stdout)
	}
	// --source by repo id: a q4 pack is found, and refused as a source
	// because it is not bf16.
	assertOneLineError(t, dgqRun("verify", "org/tiny-q4", "--source", "org/tiny-q4"), exitUsage, "bf16")
	out := filepath.Join(t.TempDir(), "mono")
	if r := dgqRun("repack", "--overlay", "-m", "org/tiny-q4", "-o", out); r.code != 0 {
		t.Errorf("repack -m ORG/NAME: %s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(snap, "model.dgq.json")); err != nil {
		t.Fatal(err)
	}
	// card: the pack's own folder is in the cache, where dgq never writes,
	// so the card goes where --out says.
	assertOneLineError(t, dgqRun("card", "org/tiny-q4"), exitUsage, "--out")
	cardFile := filepath.Join(t.TempDir(), "README.md")
	if r := dgqRun("card", "org/tiny-q4", "--out", cardFile); r.code != 0 || strings.Split(r.stdout, "\n")[0] != cardFile {
		t.Errorf("card --out: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(cardFile); err != nil || !strings.Contains(string(b), "base_model: "+testmodel.HubInfo().Repo) {
		t.Errorf("card written with --out: %v", err)
	}
	if _, err := os.Stat(filepath.Join(snap, "README.md")); err == nil {
		t.Error("card wrote into the hub cache")
	}
	assertOneLineError(t, dgqRun("inspect", "org/absent"), exitStale, "dgq download org/absent")
	assertOneLineError(t, dgqRun("audit", "org/tiny-q4@v9"), exitStale, "dgq download org/tiny-q4 --revision v9")
	assertOneLineError(t, dgqRun("inspect", testmodel.HubInfo().Repo), exitInvalid, "dgq quantize -m")
}
