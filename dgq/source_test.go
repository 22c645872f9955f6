package dgq

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
)

func TestPublicSource(t *testing.T) {
	cases := []struct{ dir, repo, want string }{
		{"/home/alice/.cache/huggingface/hub/models--a--b/snapshots/0123", "a/b", "a/b"},
		{"/Users/alice/models/diffusiongemma", "", "diffusiongemma"},
		{"/Users/alice/models/diffusiongemma/", "", "diffusiongemma"},
		{"relative/snap", "", "snap"},
		{"", "", ""},
		{"/", "", ""},
		{".", "", ""},
	}
	for _, c := range cases {
		got := PublicSource(c.dir, c.repo)
		if got != c.want {
			t.Errorf("PublicSource(%q, %q) = %q, want %q", c.dir, c.repo, got, c.want)
		}
		if IsPrivatePath(got) {
			t.Errorf("PublicSource(%q, %q) = %q is a private path", c.dir, c.repo, got)
		}
	}
}

func TestIsPrivatePath(t *testing.T) {
	cases := map[string]bool{
		"/Users/alice/x": true, "/": true, "~/models/x": true, "~": true, `C:\Users\alice`: true, "c:/x": true,
		`\\server\share`: true, "google/diffusiongemma-26B-A4B-it": false, "diffusiongemma": false, "": false,
		"model/transformer": false, "~alice": false, "C:": false,
	}
	for s, want := range cases {
		if got := IsPrivatePath(s); got != want {
			t.Errorf("IsPrivatePath(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestQuantizeRecordsNoPrivatePath: a pack made from a plain folder records
// the folder's name, one made from the hub cache the repo id (with the
// revision in the dgq object); the manifest holds no absolute path at all,
// and audit stays free of private_path notes.
func TestQuantizeRecordsNoPrivatePath(t *testing.T) {
	root := t.TempDir()
	if _, err := testmodel.WriteHubCache(filepath.Join(root, "hub")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(hfcache.EnvDGQHFHome, filepath.Join(root, "hub"))
	h := testmodel.HubInfo()
	cases := []struct {
		name, source, wantSource string
		wantRepo                 bool
	}{
		{"folder", tinySnapshot(t), "tiny", false},
		{"cache", h.Repo, h.Repo, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "pack")
			if _, err := Quantize(context.Background(), QuantizeOptions{Source: c.source, Out: out, Profile: "q4"}); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(out, ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range jsonStrings(t, raw) {
				if IsPrivatePath(s) || strings.Contains(s, root) {
					t.Errorf("manifest holds the private path %q", s)
				}
			}
			m, err := ReadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			if m.SourceModel != c.wantSource {
				t.Errorf("source_model %q, want %q", m.SourceModel, c.wantSource)
			}
			if got := m.DGQ.Source != nil && m.DGQ.Source.Repo == h.Repo && m.DGQ.Source.Revision == h.Revision; got != c.wantRepo {
				t.Errorf("dgq.source %+v", m.DGQ.Source)
			}
			rep, err := Audit(context.Background(), out, AuditOptions{})
			if err != nil || !rep.OK || len(rep.Findings) != 0 {
				t.Errorf("audit: %v %+v", err, rep)
			}
		})
	}
}

// jsonStrings returns every string value of a JSON document.
func jsonStrings(t *testing.T, raw []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestAuditNotesPrivatePath: a manifest whose source_model is an absolute
// path (as dgq wrote before, and as the engine writes) gets a private_path
// note: the audit stays ok.
func TestAuditNotesPrivatePath(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pack")
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: tinySnapshot(t), Out: out, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(out, ManifestName)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.Replace(string(raw), `"source_model": "tiny"`, `"source_model": "/Users/alice/models/tiny"`, 1))
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(context.Background(), out, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, f := range rep.Findings {
		kinds = append(kinds, f.Kind)
	}
	if !rep.OK || !slices.Equal(kinds, []string{KindPrivatePath}) || !strings.Contains(rep.Findings[0].Message, "/Users/alice/models/tiny") {
		t.Errorf("audit: %+v", rep)
	}
}

// TestResolvePack: a pack is named by its folder or, from the hub cache,
// by ORG/NAME[@REV]; a cached model that is not a pack, and a repo that is
// not cached, are refused with their classes.
func TestResolvePack(t *testing.T) {
	hub := filepath.Join(t.TempDir(), "hub")
	t.Setenv(hfcache.EnvDGQHFHome, hub)
	if _, err := testmodel.WriteHubCache(hub); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(t.TempDir(), "pack")
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: tinySnapshot(t), Out: pack, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	repoDir := filepath.Join(hub, "models--org--tiny-q4")
	snap := filepath.Join(repoDir, "snapshots", commit)
	if err := os.MkdirAll(filepath.Join(repoDir, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pack, snap); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repoDir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	cases := []struct {
		arg, want string
		err       error
	}{
		{"org/tiny-q4", snap, nil},
		{"org/tiny-q4@main", snap, nil},
		{"org/tiny-q4@" + commit, snap, nil},
		{local, local, nil},
		{"./no/such/folder", "./no/such/folder", nil},
		{"org/tiny-q4@v2", "", hfcache.ErrNotInCache},
		{"org/absent", "", hfcache.ErrNotInCache},
		{testmodel.HubInfo().Repo, "", ErrNotAPack},
		{"", "", ErrUsage},
	}
	for _, c := range cases {
		got, err := ResolvePack(c.arg)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ResolvePack(%q): %v, want %v", c.arg, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ResolvePack(%q) = %q, %v; want %q", c.arg, got, err, c.want)
		}
	}
	info, err := Inspect("org/tiny-q4")
	if err != nil || info.Profile != "q4" {
		t.Fatalf("inspect by name: %v", err)
	}
	rep, err := Audit(context.Background(), "org/tiny-q4", AuditOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("audit by name: %v %+v", err, rep)
	}
}
