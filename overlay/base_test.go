package overlay

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// fixtureHub points dgq at one of testdata's hub caches (read only: nothing
// writes there) and returns its repo id.
func fixtureHub(t *testing.T, name string) string {
	t.Helper()
	t.Setenv("DGQ_HF_HOME", filepath.Join("..", "testdata", name, "hub"))
	return "dgq-test/diffusiongemma-" + name
}

// fakeBase lays out a hub cache holding repo at revision "main" with one
// shard of one bf16 tensor that no DiffusionGemma pack holds, and points
// dgq at it.
func fakeBase(t *testing.T, repo string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "hub")
	const commit = "0123456789abcdef0123456789abcdef01234567"
	dir := filepath.Join(root, "models--"+strings.ReplaceAll(repo, "/", "--"))
	snap := filepath.Join(dir, "snapshots", commit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	header := []byte(`{"unrelated.weight":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`)
	for len(header)%8 != 0 {
		header = append(header, ' ')
	}
	shard := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	shard = append(append(shard, header...), 0, 0, 0, 0)
	if err := os.WriteFile(filepath.Join(snap, "model.safetensors"), shard, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DGQ_HF_HOME", root)
}

// Issue 21: repack --overlay on a wrong base used to succeed, writing a
// layered pack with no external file pinned to a base of another model. A
// base with another config, a tensor of another shape or dtype, or none of
// the pack's tensors is refused (ErrBase, a usage error) naming the first
// mismatch, before anything is written; the pack's own base still works.
func TestRepackOverlayRefusesAWrongBase(t *testing.T) {
	trained := fixtureHub(t, "trained")
	pack := quantize(t, trained, "q4", false)
	noConfig := filepath.Join(t.TempDir(), "no-config")
	if err := os.CopyFS(noConfig, os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(noConfig, "config.json")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		pack    string
		setup   func(t *testing.T) string // returns the base repo
		mention []string
	}{
		{"another config", pack, func(t *testing.T) string { return fixtureHub(t, "wide") },
			[]string{"another config.json", "CanvasLength 32 vs 24"}},
		{"another shape", noConfig, func(t *testing.T) string { return fixtureHub(t, "wide") },
			[]string{"model.", "holds", "the pack as"}},
		{"no tensor of the pack", noConfig, func(t *testing.T) string { fakeBase(t, "dgq-test/unrelated"); return "dgq-test/unrelated" },
			[]string{"none of the pack's raw tensors"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := c.setup(t)
			out := filepath.Join(t.TempDir(), "layered")
			_, err := RepackOverlay(context.Background(), RepackOptions{Pack: c.pack, Out: out, HFRepo: repo, HFRevision: "main"})
			if !errors.Is(err, ErrBase) {
				t.Fatalf("repack --overlay on base %s: %v, want ErrBase", repo, err)
			}
			t.Log(err)
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("output written")
			}
		})
	}
	// The pack's own base: referenced, every raw tensor pinned.
	fixtureHub(t, "trained")
	out := filepath.Join(t.TempDir(), "layered")
	res, err := RepackOverlay(context.Background(), RepackOptions{Pack: pack, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.ExternalFiles) == 0 || len(res.Mismatched) != 0 {
		t.Fatalf("own base: %d external files, mismatched %v", len(res.Manifest.ExternalFiles), res.Mismatched)
	}
}

// Issue 21: a base named by --hf-repo alone (another repo than the pack
// records, or a pack that records none) needs --hf-revision: the message
// names that flag, and the error is a usage error (ErrBase).
func TestRepackOverlayNamesTheMissingFlag(t *testing.T) {
	trained := fixtureHub(t, "trained")
	pack := quantize(t, trained, "q4", false)
	_, err := RepackOverlay(context.Background(), RepackOptions{Pack: pack, Out: filepath.Join(t.TempDir(), "o"), HFRepo: "dgq-test/diffusiongemma-wide"})
	if !errors.Is(err, ErrBase) || !strings.Contains(err.Error(), "pass --hf-revision") {
		t.Fatalf("--hf-repo of another repo alone: %v", err)
	}
	// A pack made from a plain folder records no Hugging Face source.
	plain := quantize(t, fixtureSnapshot(t), "q4", false)
	_, err = RepackOverlay(context.Background(), RepackOptions{Pack: plain, Out: filepath.Join(t.TempDir(), "o"), HFRepo: "a/b"})
	if !errors.Is(err, ErrBase) || !strings.Contains(err.Error(), "pass --hf-revision") || strings.Contains(err.Error(), "pass --hf-repo") {
		t.Fatalf("--hf-repo alone on a pack without a source: %v", err)
	}
	_, err = RepackOverlay(context.Background(), RepackOptions{Pack: plain, Out: filepath.Join(t.TempDir(), "o")})
	if !errors.Is(err, ErrBase) || !strings.Contains(err.Error(), "--hf-repo ORG/NAME --hf-revision REV") {
		t.Fatalf("no base at all: %v", err)
	}
}

// fixtureSnapshot is the embedded tiny checkpoint as a plain folder outside
// any hub cache.
func fixtureSnapshot(t *testing.T) string {
	t.Helper()
	dir, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
