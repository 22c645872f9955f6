package dgq

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestForceKeepsUserFiles: --force replaces the pack files and keeps every
// other file of the folder (a model card above all), while a stray blob of
// the old pack goes with it.
func TestForceKeepsUserFiles(t *testing.T) {
	src := tinySnapshot(t)
	out := filepath.Join(t.TempDir(), "pack")
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	user := map[string]string{
		"README.md":              "---\nbase_model: a/b\n---\n# my card\n",
		".gitattributes":         "*.bin filter=lfs\n",
		"assets/plot.png":        "png",
		"verify.json":            "{}",
		"model.dgq.bin.orphaned": "", // blob-like: a pack file, not the user's
	}
	for name, body := range user {
		p := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q6", Force: true}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(out)
	if err != nil || m.DGQ.Profile != "q6" {
		t.Fatalf("replaced pack: %v", err)
	}
	for name, body := range user {
		got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name)))
		if name == "model.dgq.bin.orphaned" {
			if err == nil {
				t.Errorf("%s of the old pack was kept", name)
			}
			continue
		}
		if err != nil || string(got) != body {
			t.Errorf("%s after --force: %q, %v", name, got, err)
		}
	}
	rep, err := Audit(context.Background(), out, AuditOptions{})
	if err != nil || !rep.OK || len(rep.Findings) != 0 {
		t.Errorf("audit after --force: %v %+v", err, rep)
	}
}
