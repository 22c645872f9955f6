package overlay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

const tinyRepo = "dgq-test/diffusiongemma-tiny"

// hubCache lays the tiny checkpoint out as a Hugging Face cache and points
// dgq at it; it returns the snapshot directory.
func hubCache(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "hub")
	snap, err := testmodel.WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DGQ_HF_HOME", root)
	return snap
}

func quantize(t *testing.T, source, profile string, overlay bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), profile+".dgq")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: source, Out: out, Profile: profile, Overlay: overlay}); err != nil {
		t.Fatalf("quantize %s overlay=%v: %v", profile, overlay, err)
	}
	return out
}

func auditOK(t *testing.T, dir string) {
	t.Helper()
	rep, err := Audit(context.Background(), dir, dgq.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("audit of %s: %v", dir, rep.Findings)
	}
}

func blobOf(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, dgq.BlobName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The "done when": an overlay quantize from the cache audits clean,
// its local blob is smaller than the self-contained blob by the raw bytes,
// and repack --monolithic of it is byte-identical to a direct quantize.
func TestOverlayQuantizeAndMonolithicRoundTrip(t *testing.T) {
	hubCache(t)
	for _, profile := range []string{"q4", "nvfp4", "bf16"} {
		t.Run(profile, func(t *testing.T) {
			layered := quantize(t, tinyRepo, profile, true)
			direct := quantize(t, tinyRepo, profile, false)
			auditOK(t, layered)
			lm, err := dgq.ReadManifest(layered)
			if err != nil {
				t.Fatal(err)
			}
			if !lm.Layered() || len(lm.ExternalFiles) == 0 || lm.BaseModel == nil || lm.BaseModel.Repo != tinyRepo || len(lm.BaseModel.Revision) != 40 {
				t.Fatalf("layered manifest: layered=%v files=%+v", lm.Layered(), lm.ExternalFiles)
			}
			var raw int64
			for _, tn := range lm.Tensors {
				if tn.Format == codecs.Raw {
					raw += tn.Size
					if tn.Source.Kind != dgq.SourceExternal {
						t.Errorf("raw tensor %s is %s, want external", tn.Name, tn.Source.Kind)
					}
				} else if tn.Source.Kind != dgq.SourceLocal {
					t.Errorf("%s tensor %s is %s, want local", tn.Format, tn.Name, tn.Source.Kind)
				}
			}
			stored := int64(len(blobOf(t, direct)))
			local := int64(len(blobOf(t, layered)))
			// Smaller by the raw bytes, up to alignment padding (64 B per tensor, 16 KiB at the split).
			if saved := stored - local; saved < raw-int64(len(lm.Tensors))*64-2*layout.ExpertSplitAlign || saved > raw+int64(len(lm.Tensors))*64+2*layout.ExpertSplitAlign {
				t.Errorf("local blob %d vs self-contained %d: saved %d, raw bytes %d", local, stored, saved, raw)
			}
			// The loader's view equals the self-contained blob byte for byte.
			p, err := Open(layered)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Blob(), blobOf(t, direct)) {
				t.Error("layered view differs from the self-contained blob")
			}
			p.Close()
			mono := filepath.Join(t.TempDir(), "mono")
			if _, err := RepackMonolithic(context.Background(), RepackOptions{Pack: layered, Out: mono}); err != nil {
				t.Fatal(err)
			}
			auditOK(t, mono)
			if !bytes.Equal(blobOf(t, mono), blobOf(t, direct)) {
				t.Fatal("repack --monolithic differs from a direct quantize")
			}
			mm, _ := dgq.ReadManifest(mono)
			dm, _ := dgq.ReadManifest(direct)
			mm.SourceModel, dm.SourceModel = "", ""
			a, _ := mm.Marshal()
			b, _ := dm.Marshal()
			if !bytes.Equal(a, b) {
				t.Error("repack --monolithic manifest differs from a direct quantize's")
			}
		})
	}
}

// repack --overlay of a monolithic pack audits clean and flattens back to it.
func TestRepackOverlayRoundTrip(t *testing.T) {
	hubCache(t)
	direct := quantize(t, tinyRepo, "q4", false)
	layered := filepath.Join(t.TempDir(), "layered")
	res, err := RepackOverlay(context.Background(), RepackOptions{Pack: direct, Out: layered})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Mismatched) != 0 {
		t.Fatalf("verbatim audit found mismatches: %v", res.Mismatched)
	}
	auditOK(t, layered)
	mono := filepath.Join(t.TempDir(), "mono")
	if _, err := RepackMonolithic(context.Background(), RepackOptions{Pack: layered, Out: mono}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blobOf(t, mono), blobOf(t, direct)) {
		t.Fatal("overlay → monolithic round trip changed the blob")
	}
	// Wrong kinds of input are refused.
	if _, err := RepackOverlay(context.Background(), RepackOptions{Pack: layered, Out: filepath.Join(t.TempDir(), "x")}); !errors.Is(err, ErrRepack) {
		t.Errorf("repack --overlay of a layered pack: %v", err)
	}
	if _, err := RepackMonolithic(context.Background(), RepackOptions{Pack: direct, Out: filepath.Join(t.TempDir(), "x")}); !errors.Is(err, ErrRepack) {
		t.Errorf("repack --monolithic of a self-contained pack: %v", err)
	}
}

// A raw tensor that differs from the base is stored locally and reported;
// the result still audits clean and keeps its bytes.
func TestVerbatimAuditStoresMismatchLocally(t *testing.T) {
	snap := hubCache(t)
	direct := quantize(t, snap, "q4", false)
	// Alter one raw tensor in the pack (and its digest, as if it had been made from other weights).
	m, _ := dgq.ReadManifest(direct)
	var victim *dgq.Tensor
	for i := range m.Tensors {
		if m.Tensors[i].Class == layout.Norm {
			victim = &m.Tensors[i]
			break
		}
	}
	blob := blobOf(t, direct)
	blob[victim.Offset] ^= 0x01
	os.WriteFile(filepath.Join(direct, dgq.BlobName), blob, 0o644)
	victim.Digest = dgq.Digest(blob[victim.Offset : victim.Offset+victim.Size])
	data, _ := m.Marshal()
	os.WriteFile(filepath.Join(direct, dgq.ManifestName), data, 0o644)
	layered := filepath.Join(t.TempDir(), "layered")
	res, err := RepackOverlay(context.Background(), RepackOptions{Pack: direct, Out: layered})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Mismatched) != 1 || res.Mismatched[0] != victim.Name {
		t.Fatalf("mismatches %v, want [%s]", res.Mismatched, victim.Name)
	}
	lm, _ := dgq.ReadManifest(layered)
	for _, tn := range lm.Tensors {
		if tn.Name == victim.Name && tn.Source.Kind != dgq.SourceLocal {
			t.Fatalf("mismatching tensor is %s", tn.Source.Kind)
		}
	}
	auditOK(t, layered)
	p, err := Open(layered)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !bytes.Equal(p.Blob(), blob) {
		t.Fatal("layered view lost the altered tensor")
	}
}

// Stale external files: each case is refused by the loader and reported by
// audit with the dgq download command.
func TestStaleExternalFiles(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, snap string, m *dgq.Manifest)
		what   string
	}{
		{"changed header of equal length", func(t *testing.T, snap string, m *dgq.Manifest) {
			p := blobPath(t, snap, m.ExternalFiles[0].Path)
			b, _ := os.ReadFile(p)
			i := bytes.Index(b, []byte(`"BF16"`))
			copy(b[i:], `"F16" `) // same length, other header
			writeOver(t, p, b)
		}, "header sha256"},
		{"truncated shard", func(t *testing.T, snap string, m *dgq.Manifest) {
			p := blobPath(t, snap, m.ExternalFiles[1].Path)
			b, _ := os.ReadFile(p)
			writeOver(t, p, b[:len(b)-10])
		}, "bytes"},
		{"missing blob", func(t *testing.T, snap string, m *dgq.Manifest) {
			os.Remove(blobPath(t, snap, m.ExternalFiles[0].Path))
		}, "missing"},
		{"wrong revision", func(t *testing.T, snap string, m *dgq.Manifest) {
			os.Rename(snap, snap+"-moved")
		}, "not in the cache"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := hubCache(t)
			layered := quantize(t, tinyRepo, "q4", true)
			m, _ := dgq.ReadManifest(layered)
			c.damage(t, snap, m)
			_, err := Open(layered)
			var se *hfcache.StaleError
			if !errors.As(err, &se) || !errors.Is(err, hfcache.ErrStale) {
				t.Fatalf("Open: %v", err)
			}
			if !strings.Contains(err.Error(), "dgq download "+tinyRepo) || !strings.Contains(err.Error(), c.what) {
				t.Errorf("error %q lacks the fix or %q", err, c.what)
			}
			rep, err := Audit(context.Background(), layered, dgq.AuditOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Findings {
				found = found || (f.Kind == dgq.KindStale && strings.Contains(f.Message, "dgq download "+tinyRepo+" --revision "))
			}
			if rep.OK || !found {
				t.Fatalf("audit findings %v", rep.Findings)
			}
		})
	}
}

// blobPath is the blob a snapshot entry links to (damaging it through the
// read-only-by-convention symlink would be unusual; tests write the blob).
func blobPath(t *testing.T, snap, name string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(filepath.Join(snap, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeOver(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// quantize --overlay needs a cache source; a plain folder is refused before
// anything is written.
func TestOverlayNeedsCacheSource(t *testing.T) {
	plain, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "plain"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o")
	_, err = dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: plain, Out: out, Profile: "q4", Overlay: true})
	if !errors.Is(err, dgq.ErrUsage) {
		t.Fatalf("overlay from a plain folder: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("output created")
	}
}

// The loader maps the expert tail from the local blob (a change to the file
// shows through the view) and copies the head (it does not).
func TestTailIsMappedHeadIsCopied(t *testing.T) {
	hubCache(t)
	layered := quantize(t, tinyRepo, "q4", true)
	m, _ := dgq.ReadManifest(layered)
	p, err := Open(layered)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var head, tail *dgq.Tensor
	for i := range m.Tensors {
		tn := &m.Tensors[i]
		if tn.Source.Kind != dgq.SourceLocal {
			continue
		}
		if tn.Class == layout.Experts && tail == nil {
			tail = tn
		} else if tn.Class != layout.Experts && head == nil {
			head = tn
		}
	}
	f, err := os.OpenFile(filepath.Join(layered, dgq.BlobName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	view := p.Blob()
	for _, c := range []struct {
		t      *dgq.Tensor
		mapped bool
	}{{tail, true}, {head, false}} {
		before := view[c.t.Offset]
		if _, err := f.WriteAt([]byte{before ^ 0xFF}, c.t.Source.Offset); err != nil {
			t.Fatal(err)
		}
		if got := view[c.t.Offset] != before; got != c.mapped {
			t.Errorf("%s (%s): view changed with the file = %v, want %v", c.t.Name, c.t.Class, got, c.mapped)
		}
	}
}

// An external reference can never read outside the cache: a snapshot entry
// that links out of the cache root is refused, and manifest paths with ".."
// or absolute paths are refused before anything is opened.
func TestExternalReferencesStayInsideTheCache(t *testing.T) {
	snap := hubCache(t)
	layered := quantize(t, tinyRepo, "q4", true)
	m, _ := dgq.ReadManifest(layered)
	outside := filepath.Join(t.TempDir(), "elsewhere.safetensors")
	target, _ := filepath.EvalSymlinks(filepath.Join(snap, m.ExternalFiles[0].Path))
	b, _ := os.ReadFile(target)
	os.WriteFile(outside, b, 0o644)
	link := filepath.Join(snap, m.ExternalFiles[0].Path)
	os.Remove(link)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(layered); !errors.Is(err, hfcache.ErrStale) || !strings.Contains(err.Error(), "outside the cache root") {
		t.Fatalf("escaping symlink: %v", err)
	}
	for _, bad := range []string{"../../../etc/passwd", "/etc/passwd", `a\b`, "a/../../b"} {
		edited := *m
		edited.ExternalFiles = append([]dgq.ExternalFile(nil), m.ExternalFiles...)
		edited.ExternalFiles[0].Path = bad
		findings := dgq.Validate(&edited, -1)
		found := false
		for _, f := range findings {
			found = found || f.Kind == dgq.KindSource
		}
		if !found {
			t.Errorf("path %q accepted: %v", bad, findings)
		}
	}
}

// repack never writes into the input pack or the Hugging Face cache.
func TestRepackOutputPlacement(t *testing.T) {
	snap := hubCache(t)
	layered := quantize(t, tinyRepo, "q4", true)
	for _, out := range []string{filepath.Join(layered, "sub"), filepath.Join(filepath.Dir(filepath.Dir(snap)), "x")} {
		if _, err := RepackMonolithic(context.Background(), RepackOptions{Pack: layered, Out: out}); !errors.Is(err, dgq.ErrUsage) {
			t.Errorf("repack to %s: %v", out, err)
		}
	}
}

// Repacks verify every digest while streaming: a damaged local blob stops
// repack --monolithic before anything is published.
func TestRepackRefusesDamagedBytes(t *testing.T) {
	hubCache(t)
	layered := quantize(t, tinyRepo, "q4", true)
	m, _ := dgq.ReadManifest(layered)
	var victim dgq.Tensor
	for _, tn := range m.Tensors {
		if tn.Source.Kind == dgq.SourceLocal {
			victim = tn
			break
		}
	}
	blob := blobOf(t, layered)
	blob[victim.Source.Offset] ^= 0x01
	writeOver(t, filepath.Join(layered, dgq.BlobName), blob)
	out := filepath.Join(t.TempDir(), "mono")
	_, err := RepackMonolithic(context.Background(), RepackOptions{Pack: layered, Out: out})
	if !errors.Is(err, dgq.ErrInvalid) || !strings.Contains(err.Error(), victim.Name) {
		t.Fatalf("repack of a damaged pack: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("output published")
	}
}

// A pack that records an absolute source_model (dgq before it stopped, or
// the engine) is repacked into one that records the repo id: no manifest dgq
// writes holds a path of the machine.
func TestRepackDropsPrivatePath(t *testing.T) {
	snap := hubCache(t)
	direct := quantize(t, tinyRepo, "q4", false)
	p := filepath.Join(direct, dgq.ManifestName)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	old := `"source_model": "` + tinyRepo + `"`
	if !bytes.Contains(raw, []byte(old)) {
		t.Fatalf("manifest does not record %s", old)
	}
	raw = bytes.Replace(raw, []byte(old), []byte(`"source_model": "`+snap+`"`), 1)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	layered := filepath.Join(t.TempDir(), "layered")
	if _, err := RepackOverlay(context.Background(), RepackOptions{Pack: direct, Out: layered}); err != nil {
		t.Fatal(err)
	}
	mono := filepath.Join(t.TempDir(), "mono")
	if _, err := RepackMonolithic(context.Background(), RepackOptions{Pack: layered, Out: mono}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{layered, mono} {
		m, err := dgq.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.SourceModel != tinyRepo {
			t.Errorf("%s: source_model %q, want %q", filepath.Base(dir), m.SourceModel, tinyRepo)
		}
	}
}
