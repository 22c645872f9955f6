package dgq

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq/enginepack"
	"github.com/dgq-dev/dgq/hfcache"
)

// The engine's packs, as written by enginepack (an independent model of the
// engine's writer made from the facts in docs/format.md, not from dgq's
// writer), for every kind and version the engine writes self-contained.
var enginePackCases = []struct {
	name    string
	opts    enginepack.Options
	version int
	// dgq's quantize options that must give the same blob with --encoder
	// minmax ("" when dgq has no profile that writes this pack).
	profile string
	sets    []string
}{
	{"q4", enginepack.Options{Profile: "q4"}, 1, "q4", nil},
	{"q6", enginepack.Options{Profile: "q6"}, 1, "q6", nil},
	{"nvfp4", enginepack.Options{Profile: "nvfp4"}, 2, "nvfp4", nil},
	{"nvfp4x", enginepack.Options{Profile: "q4", Overrides: map[string]string{"experts.gate_up": "nvfp4_block", "experts.down": "nvfp4_block"}}, 4, "nvfp4x", nil},
	{"attn-q8", enginepack.Options{Profile: "q4", Overrides: map[string]string{"attn": "q8_row"}}, 4, "q4", []string{"attn=q8"}},
	{"nvfp4_experts", enginepack.Options{Profile: "nvfp4_experts"}, 2, "", nil},
	{"engine-q5", enginepack.Options{Profile: "q5"}, 1, "", nil},
	{"pre-split", enginepack.Options{Profile: "q4", NoExpertSplit: true}, 1, "", nil},
	{"nvfp4-pre-split", enginepack.Options{Profile: "nvfp4", NoExpertSplit: true}, 2, "", nil},
}

func writeEnginePack(t testing.TB, src string, opts enginepack.Options) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "engine")
	if err := enginepack.Write(src, out, opts); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEnginePacksLoad: every pack the engine writes opens in dgq (every
// structural rule holds), every tensor decodes bit for bit as the engine's
// own decoder decodes it, raw tensors are the source bytes, audit reports
// only the missing digests (a note), audit --deep finds every tensor finite,
// and inspect says the engine runs it.
func TestEnginePacksLoad(t *testing.T) {
	for srcName, src := range map[string]string{"tiny": tinySnapshot(t), "wide": wideSnapshot(t)} {
		snap, err := hfcache.OpenSnapshot(src)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		source := map[string][]byte{}
		for _, r := range snap.Tensors() {
			source[r.Name] = r.Bytes()
		}
		for _, c := range enginePackCases {
			t.Run(srcName+"/"+c.name, func(t *testing.T) {
				dir := writeEnginePack(t, src, c.opts)
				p, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				m := p.Manifest
				if m.Version != c.version || m.DGQ != nil {
					t.Errorf("version %d (want %d), dgq object %v", m.Version, c.version, m.DGQ)
				}
				if _, ok := m.Split(); ok == c.opts.NoExpertSplit {
					t.Errorf("expert_split present: %v", ok)
				}
				for _, tn := range m.Tensors {
					checkEngineDecode(t, p, tn, source[tn.Name])
				}
				rep, err := Audit(context.Background(), dir, AuditOptions{Deep: true})
				if err != nil {
					t.Fatal(err)
				}
				want := []string{KindNoDigests}
				if IsPrivatePath(m.SourceModel) { // the engine records the source's path as given
					want = []string{KindPrivatePath, KindNoDigests}
				}
				if !rep.OK || !slices.Equal(findingKinds(rep.Findings), want) {
					t.Errorf("audit: ok=%v %v", rep.OK, rep.Findings)
				}
				info, err := Inspect(dir)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(info.RunsOn, "diffgemma") || info.FormatVersion != c.version || len(info.Findings) != 0 {
					t.Errorf("inspect: runs_on %v, format_version %d, findings %v", info.RunsOn, info.FormatVersion, info.Findings)
				}
			})
		}
	}
}

// checkEngineDecode compares dgq's decoding of one tensor with the
// independent decoder's, bit for bit, and a raw tensor with its source.
func checkEngineDecode(t *testing.T, p *Pack, tn Tensor, src []byte) {
	t.Helper()
	b, err := p.TensorBytes(tn.Name)
	if err != nil {
		t.Fatal(err)
	}
	if tn.Format == codecs.Raw && !bytes.Equal(b, src) {
		t.Errorf("%s: raw bytes differ from the source", tn.Name)
	}
	want, err := enginepack.Decode(tn.Format.Kind(), tn.DType.String(), b, tn.Shape)
	if err != nil {
		t.Fatalf("%s: %v", tn.Name, err)
	}
	m, _ := codecs.FlattenShape(tn.Shape)
	got := make([]float32, m.Elements())
	if err := codecs.DecodeRows(tn.Format, tn.DType, m, b, 0, m.Rows, got); err != nil {
		t.Fatalf("%s: %v", tn.Name, err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s (%s) element %d: dgq %v, engine %v", tn.Name, tn.Format.Kind(), i, got[i], want[i])
		}
	}
}

// TestMinMaxMatchesEngineWriter: `quantize --encoder minmax` writes the
// engine's blob byte for byte, and a manifest with the engine's values (its
// own additions aside), for q4, q6, nvfp4, nvfp4x and --set attn=q8, on the
// tiny and the held-out wide checkpoint.
func TestMinMaxMatchesEngineWriter(t *testing.T) {
	for srcName, src := range map[string]string{"tiny": tinySnapshot(t), "wide": wideSnapshot(t)} {
		for _, c := range enginePackCases {
			if c.profile == "" {
				continue
			}
			t.Run(srcName+"/"+c.name, func(t *testing.T) {
				engine := writeEnginePack(t, src, c.opts)
				out := filepath.Join(t.TempDir(), "dgq")
				if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: c.profile, Sets: c.sets, Encoder: codecs.MinMax}); err != nil {
					t.Fatal(err)
				}
				if fileSHA(t, filepath.Join(out, BlobName)) != fileSHA(t, filepath.Join(engine, BlobName)) {
					t.Fatal("blob differs from the engine's")
				}
				em, err := ReadManifest(engine)
				if err != nil {
					t.Fatal(err)
				}
				dm, err := ReadManifest(out)
				if err != nil {
					t.Fatal(err)
				}
				compareEngineFields(t, em, dm)
				if dm.DGQ.Encoder == nil || *dm.DGQ.Encoder != codecs.MinMax || dm.DGQ.DGQOnly != "" {
					t.Errorf("dgq object %+v", dm.DGQ)
				}
			})
		}
	}
}

// compareEngineFields checks that two manifests agree on every field the
// engine reads (source_model aside: it records where each was made from).
func compareEngineFields(t *testing.T, want, got *Manifest) {
	t.Helper()
	if got.Version != want.Version || got.Profile != want.Profile || got.Blob != want.Blob ||
		!equalPtr(got.ExpertSplit, want.ExpertSplit) || !equalPtr(got.LocalExpertSplit, want.LocalExpertSplit) {
		t.Errorf("header: version %d/%d profile %s/%s blob %s/%s split %v/%v local split %v/%v", got.Version, want.Version,
			got.Profile, want.Profile, got.Blob, want.Blob, deref(got.ExpertSplit), deref(want.ExpertSplit),
			deref(got.LocalExpertSplit), deref(want.LocalExpertSplit))
	}
	if len(got.CustomClasses) != len(want.CustomClasses) {
		t.Errorf("custom_classes %v, engine %v", got.CustomClasses, want.CustomClasses)
	}
	for k, v := range want.CustomClasses {
		if got.CustomClasses[k] != v {
			t.Errorf("custom_classes %v, engine %v", got.CustomClasses, want.CustomClasses)
		}
	}
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, engine %d", len(got.Tensors), len(want.Tensors))
	}
	for i, w := range want.Tensors {
		g := got.Tensors[i]
		if g.Name != w.Name || g.Format != w.Format || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) ||
			g.Offset != w.Offset || g.Size != w.Size || !equalSource(g.Source, w.Source) {
			t.Errorf("tensor %d: %+v, engine %+v", i, g, w)
		}
	}
	if len(got.ExternalFiles) != len(want.ExternalFiles) {
		t.Errorf("external_files %v, engine %v", got.ExternalFiles, want.ExternalFiles)
	}
	for i := range min(len(got.ExternalFiles), len(want.ExternalFiles)) {
		if got.ExternalFiles[i] != want.ExternalFiles[i] {
			t.Errorf("external file %+v, engine %+v", got.ExternalFiles[i], want.ExternalFiles[i])
		}
	}
}

func equalPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func equalSource(a, b *Source) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestLegacyPackRefused: a pack of dgq's earlier planar format gets one
// line naming what it is.
func TestLegacyPackRefused(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"format_version": 2, "generator": "dgq 0.1.0-dev", "profile": "q4", "blob": "model.dgq.bin", "tensors": []}`), 0o644)
	_, err := Open(dir)
	if !errors.Is(err, ErrLegacyFormat) || !errors.Is(err, ErrManifest) {
		t.Fatalf("Open: %v", err)
	}
}

// findingKinds lists the kinds of findings in order.
func findingKinds(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}
