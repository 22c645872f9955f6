package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
)

func TestDryRunTable(t *testing.T) {
	r := dgqRun("quantize", "--profile", "q4", "-m", tiny(t), "--dry-run")
	if r.code != 0 {
		t.Fatalf("dry run: %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"class", "bits/weight", "experts", "total", "nothing written"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestExistingOutputNeedsForce(t *testing.T) {
	src := tiny(t)
	out := filepath.Join(t.TempDir(), "o")
	if r := dgqRun("quantize", "--profile", "q4", "-m", src, "-o", out); r.code != 0 {
		t.Fatal(r.stderr)
	}
	assertOneLineError(t, dgqRun("quantize", "--profile", "q4", "-m", src, "-o", out), exitUsage, "--force")
	if r := dgqRun("quantize", "--profile", "q5", "-m", src, "-o", out, "--force"); r.code != 0 {
		t.Fatal(r.stderr)
	}
}

// TestQuantizeOverlayReportsWhatItWrote: a layered pack's last line gives the
// own blob's size as written (the file's size), the canonical size apart,
// and says "layered"; --json has both.
func TestQuantizeOverlayReportsWhatItWrote(t *testing.T) {
	hub := filepath.Join(t.TempDir(), "hub")
	if _, err := testmodel.WriteHubCache(hub); err != nil {
		t.Fatal(err)
	}
	t.Setenv(hfcache.EnvDGQHFHome, hub)
	dir := t.TempDir()
	out := filepath.Join(dir, "ov")
	r := dgqRun("quantize", "--profile", "q4", "--overlay", "-m", testmodel.HubInfo().Repo, "-o", out)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	st, err := os.Stat(filepath.Join(out, dgq.BlobName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := dgq.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= m.CanonicalSize() {
		t.Fatalf("own blob %d bytes, canonical %d: not a layered layout", st.Size(), m.CanonicalSize())
	}
	want := fmt.Sprintf("layered: own blob %s (%d bytes) written, canonical size %d bytes", humanBytes(st.Size()), st.Size(), m.CanonicalSize())
	if !strings.Contains(r.stdout, want) {
		t.Errorf("output lacks %q:\n%s", want, r.stdout)
	}
	r = dgqRun("quantize", "--profile", "q4", "--overlay", "-m", testmodel.HubInfo().Repo, "-o", filepath.Join(dir, "ov2"), "--json")
	var res struct {
		Layered       bool   `json:"layered"`
		BlobSize      int64  `json:"blob_size"`
		LocalBlobSize *int64 `json:"local_blob_size"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !res.Layered || res.LocalBlobSize == nil || *res.LocalBlobSize != st.Size() || res.BlobSize != m.CanonicalSize() {
		t.Errorf("quantize --overlay --json: %v %s", err, r.stdout)
	}
}

// TestQuantizeRemovesStaleStaging: the staging folder a killed run left for
// another output in the same parent folder is removed, and quantize says so.
func TestQuantizeRemovesStaleStaging(t *testing.T) {
	parent := t.TempDir()
	stale := filepath.Join(parent, ".other.dgq-tmp-999999999-1")
	if err := os.MkdirAll(filepath.Join(stale, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := dgqRun("quantize", "--profile", "q4", "-m", tiny(t), "-o", filepath.Join(parent, "pack"))
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale staging folder survived")
	}
	if !strings.Contains(r.stdout, "removed "+stale+": the staging folder of a run that was killed") {
		t.Errorf("quantize does not say it removed %s:\n%s", stale, r.stdout)
	}
}

// TestQuantizeSpellingsAndSplitExperts: case-insensitive names, bf16 for
// raw, comma-separated --set lists, and the expert stacks in two formats —
// a dgq-only pack that stores down_proj in q8, gate_up_proj in q4, and runs.
func TestQuantizeSpellingsAndSplitExperts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "split")
	r := dgqRun("quantize", "--profile", "Q4", "--set", "Experts.Down=Q8,attn=bf16", "--encoder", "MinMax", "-m", tiny(t), "-o", out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "dgq-only") {
		t.Errorf("no dgq-only line:\n%s", r.stdout)
	}
	var info struct {
		Tensors []struct{ Name, Format string } `json:"tensors"`
	}
	if err := json.Unmarshal([]byte(dgqRun("inspect", out, "--json").stdout), &info); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, tn := range info.Tensors {
		for _, stack := range []string{"gate_up_proj", "down_proj"} {
			if strings.HasSuffix(tn.Name, "experts."+stack) {
				if prev, ok := kinds[stack]; ok && prev != tn.Format {
					t.Errorf("%s in %s and %s", stack, prev, tn.Format)
				}
				kinds[stack] = tn.Format
			}
		}
	}
	if kinds["down_proj"] != "q8_row" || kinds["gate_up_proj"] != "q4_block" {
		t.Errorf("expert kinds %v, want down_proj q8_row and gate_up_proj q4_block", kinds)
	}
	if r := dgqRun("audit", "--deep", out); r.code != 0 || !strings.Contains(r.stdout, "--deep: every tensor decoded, every value finite") {
		t.Errorf("audit --deep: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := dgqRun("run", out, "--prompt", "hi", "--max-new-tokens", "8", "--max-steps", "2"); r.code != 0 {
		t.Errorf("run: exit %d: %s", r.code, r.stderr)
	}
}
