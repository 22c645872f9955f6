package overlay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/enginepack"
)

// revisionOf is the pinned revision of a snapshot directory
// (…/snapshots/REV).
func revisionOf(snap string) string { return filepath.Base(snap) }

func enginePack(t *testing.T, src, name string, opts enginepack.Options) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if err := enginepack.Write(src, out, opts); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEngineLayeredPacks: layered packs as the engine writes them — its
// overlay (hf_safetensors, version 3), an overlay with custom classes
// (version 4) and a pack_bin layer over another pack — load through the one
// loader, assemble to exactly the engine's self-contained blob, audit with
// only the missing-digests note, and flatten with repack --monolithic to
// that same blob.
func TestEngineLayeredPacks(t *testing.T) {
	snap := hubCache(t)
	base := &enginepack.BaseModel{Repo: tinyRepo, Revision: revisionOf(snap)}
	custom := map[string]string{"experts.gate_up": "nvfp4_block", "experts.down": "nvfp4_block"}
	for _, c := range []struct {
		name    string
		plain   enginepack.Options
		layered func(plainDir string) enginepack.Options
		version int
	}{
		{"overlay", enginepack.Options{Profile: "q4"}, func(string) enginepack.Options { return enginepack.Options{Profile: "q4", Overlay: base} }, 3},
		{"overlay-nvfp4", enginepack.Options{Profile: "nvfp4"}, func(string) enginepack.Options { return enginepack.Options{Profile: "nvfp4", Overlay: base} }, 3},
		{"overlay-custom", enginepack.Options{Profile: "q4", Overrides: custom}, func(string) enginepack.Options {
			return enginepack.Options{Profile: "q4", Overrides: custom, Overlay: base}
		}, 4},
		{"overlay-pre-split", enginepack.Options{Profile: "q4", NoExpertSplit: true}, func(string) enginepack.Options {
			return enginepack.Options{Profile: "q4", Overlay: base, NoExpertSplit: true}
		}, 3},
		{"pack_bin", enginepack.Options{Profile: "q6"}, func(plain string) enginepack.Options {
			return enginepack.Options{Profile: "q6", PackBinFrom: "../plain/" + dgq.BlobName}
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			plain := filepath.Join(dir, "plain")
			if err := enginepack.Write(snap, plain, c.plain); err != nil {
				t.Fatal(err)
			}
			layered := filepath.Join(dir, "layered")
			if err := enginepack.Write(snap, layered, c.layered(plain)); err != nil {
				t.Fatal(err)
			}
			p, err := Open(layered)
			if err != nil {
				t.Fatal(err)
			}
			if p.Manifest.Version != c.version || !p.Manifest.Layered() {
				t.Errorf("version %d layered %v", p.Manifest.Version, p.Manifest.Layered())
			}
			if !bytes.Equal(p.Blob(), blobOf(t, plain)) {
				t.Error("assembled view differs from the engine's self-contained blob")
			}
			p.Close()
			rep, err := Audit(context.Background(), layered, dgq.AuditOptions{Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || !slices.Equal(findingKinds(rep.Findings), []string{dgq.KindPrivatePath, dgq.KindNoDigests}) { // the engine records the source's absolute path
				t.Errorf("audit: ok=%v %v", rep.OK, rep.Findings)
			}
			mono := filepath.Join(t.TempDir(), "mono")
			if _, err := RepackMonolithic(context.Background(), RepackOptions{Pack: layered, Out: mono}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(blobOf(t, mono), blobOf(t, plain)) {
				t.Error("repack --monolithic differs from the engine's self-contained blob")
			}
		})
	}
}

// TestOverlayMinMaxMatchesEngine: quantize --overlay --encoder minmax
// writes the engine's overlay byte for byte: the same compact local blob and
// the same sources, pins and splits.
func TestOverlayMinMaxMatchesEngine(t *testing.T) {
	snap := hubCache(t)
	engine := enginePack(t, snap, "engine", enginepack.Options{Profile: "q4", Overlay: &enginepack.BaseModel{Repo: tinyRepo, Revision: revisionOf(snap)}})
	out := filepath.Join(t.TempDir(), "dgq")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: tinyRepo, Out: out, Profile: "q4", Overlay: true, Encoder: codecs.MinMax}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blobOf(t, out), blobOf(t, engine)) {
		t.Fatal("local blob differs from the engine's")
	}
	em, _ := dgq.ReadManifest(engine)
	dm, _ := dgq.ReadManifest(out)
	if dm.Version != em.Version || *dm.LocalExpertSplit != *em.LocalExpertSplit || *dm.BaseModel != *em.BaseModel || len(dm.ExternalFiles) != len(em.ExternalFiles) {
		t.Fatalf("manifest header differs: %+v vs %+v", dm, em)
	}
	for i, f := range em.ExternalFiles {
		if dm.ExternalFiles[i] != f {
			t.Errorf("external file %+v, engine %+v", dm.ExternalFiles[i], f)
		}
	}
	for i, w := range em.Tensors {
		g := dm.Tensors[i]
		if g.Name != w.Name || g.Offset != w.Offset || g.Size != w.Size || *g.Source != *w.Source {
			t.Errorf("tensor %s: %+v %+v, engine %+v %+v", w.Name, g, g.Source, w, w.Source)
		}
	}
}

// TestPackBinOutsidePackAbsolute: a pack_bin path may be absolute (the
// engine's rule); a missing target is refused naming the file.
func TestPackBinOutsidePackAbsolute(t *testing.T) {
	snap := hubCache(t)
	plain := enginePack(t, snap, "plain", enginepack.Options{Profile: "q4"})
	layered := enginePack(t, snap, "layered", enginepack.Options{Profile: "q4", PackBinFrom: filepath.Join(plain, dgq.BlobName)})
	p, err := Open(layered)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	os.Rename(filepath.Join(plain, dgq.BlobName), filepath.Join(plain, "moved.bin"))
	if _, err := Open(layered); err == nil || !strings.Contains(err.Error(), dgq.BlobName) {
		t.Fatalf("Open with the pack_bin target gone: %v", err)
	}
}

// findingKinds lists the kinds of findings in order.
func findingKinds(fs []dgq.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}
