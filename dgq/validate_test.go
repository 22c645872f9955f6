package dgq

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

var (
	packOnce sync.Once
	packDir  string
	packErr  error
)

// goodPack quantizes the tiny checkpoint once (q4) and returns a fresh copy
// of the pack for each caller to damage.
func goodPack(t *testing.T) string {
	t.Helper()
	packOnce.Do(func() {
		root, err := os.MkdirTemp("", "dgq-goodpack-")
		if err != nil {
			packErr = err
			return
		}
		packDir = filepath.Join(root, "pack")
		_, packErr = Quantize(context.Background(), QuantizeOptions{Source: tinySnapshot(t), Out: packDir, Profile: "q4"})
	})
	if packErr != nil {
		t.Fatal(packErr)
	}
	dst := filepath.Join(t.TempDir(), "pack")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(packDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(packDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if packDir != "" {
		os.RemoveAll(filepath.Dir(packDir))
	}
	os.Exit(code)
}

func editManifest(t *testing.T, dir string, edit func(m *Manifest)) {
	t.Helper()
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func tensorIndex(m *Manifest, class layout.Class, nth int) int {
	for i, t := range m.Tensors {
		if t.Class == class {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	return -1
}

// Each damaged manifest is refused by Open and reported by Audit with the
// expected finding kind.
func TestValidateFindings(t *testing.T) {
	cases := []struct {
		name string
		edit func(m *Manifest)
		kind string
	}{
		{"future version", func(m *Manifest) { m.Version = 99 }, KindVersion},
		{"dgq-only kind under version 1", func(m *Manifest) {
			i := tensorIndex(m, layout.Experts, 0)
			for j := range m.Tensors {
				if m.Tensors[j].Class == layout.Experts {
					m.Tensors[j].Format = codecs.Q5
					m.Tensors[j].Size = m.Tensors[j].Size / 20 * 24
				}
			}
			_ = i
		}, KindVersion},
		{"unknown profile", func(m *Manifest) { m.Profile = "q3" }, KindManifest},
		{"misaligned offset", func(m *Manifest) { m.Tensors[3].Offset += 8 }, KindAlignment},
		{"overlap", func(m *Manifest) { m.Tensors[4].Offset = m.Tensors[3].Offset }, KindOverlap},
		{"size mismatch", func(m *Manifest) { m.Tensors[2].Size += 2 }, KindSize},
		{"offset near 2^63", func(m *Manifest) { m.Tensors[1].Offset = math.MaxInt64 - 63 }, KindBounds},
		{"past blob end", func(m *Manifest) { m.Tensors[len(m.Tensors)-1].Offset += 1 << 20 }, KindBlob},
		{"duplicate tensor", func(m *Manifest) { m.Tensors[5].Name = m.Tensors[4].Name }, KindName},
		{"empty name", func(m *Manifest) { m.Tensors[5].Name = "" }, KindName},
		{"locked class quantized", func(m *Manifest) {
			i := tensorIndex(m, layout.Norm, 0)
			m.Tensors[i].Format = codecs.Q8
		}, KindClass},
		{"class does not match name", func(m *Manifest) { m.Tensors[tensorIndex(m, layout.Attn, 0)].Class = layout.Dense }, KindClass},
		{"expert before split", func(m *Manifest) { *m.ExpertSplit += layout.ExpertSplitAlign }, KindExpertSplit},
		{"split misaligned", func(m *Manifest) { *m.ExpertSplit += 64 }, KindExpertSplit},
		{"bad digest", func(m *Manifest) { m.Tensors[0].Digest = "xyz" }, KindDigest},
		{"blob escapes", func(m *Manifest) { m.Blob = "../model.dgq.bin" }, KindManifest},
		{"blob size lies", func(m *Manifest) { m.DGQ.BlobSize += 64 }, KindManifest},
		{"side file digest", func(m *Manifest) { m.DGQ.Files[0].Digest = "00" }, KindFile},
		{"dgq-only without version", func(m *Manifest) { m.DGQ.DGQOnly = "because" }, KindVersion},
		{"custom classes under version 1", func(m *Manifest) { m.CustomClasses = map[string]string{"attn": "raw"} }, KindVersion},
		{"bad custom class", func(m *Manifest) { m.Version, m.CustomClasses = VersionCustom, map[string]string{"router": "q4_block"} }, KindManifest},
		{"shape vs format", func(m *Manifest) {
			i := tensorIndex(m, layout.Experts, 0)
			m.Tensors[i].Shape = append([]int64(nil), m.Tensors[i].Shape...)
			m.Tensors[i].Shape[len(m.Tensors[i].Shape)-1] = 33
		}, KindDims},
		{"experts split formats", func(m *Manifest) {
			i := tensorIndex(m, layout.Experts, 1)
			m.Tensors[i].Format = codecs.Q6
		}, KindClass},
		{"nvfp4 under version 1", func(m *Manifest) {
			i := tensorIndex(m, layout.SC, 0)
			m.Tensors[i].Format = codecs.NVFP4
		}, KindVersion},
		{"unknown source file", func(m *Manifest) { m.Tensors[0].Source = &Source{Kind: "external", File: "x"} }, KindSource},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := goodPack(t)
			editManifest(t, dir, c.edit)
			_, err := Open(dir)
			var ie *InvalidError
			if c.kind != KindSource {
				if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Open accepted the pack or failed oddly: %v", err)
				}
			} else if err == nil {
				t.Fatal("Open accepted a layered pack")
			}
			rep, err := Audit(context.Background(), dir, AuditOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatal("audit passed")
			}
			found := false
			for _, f := range rep.Findings {
				found = found || f.Kind == c.kind
			}
			if !found {
				t.Fatalf("no %s finding in %v", c.kind, rep.Findings)
			}
		})
	}
}

func TestManifestDecodeFindings(t *testing.T) {
	dir := goodPack(t)
	b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	var raw map[string]any
	json.Unmarshal(b, &raw)
	ts := raw["tensors"].([]any)
	ts[0].(map[string]any)["kind"] = "q3"
	ts[1].(map[string]any)["class"] = "teapot"
	ts[2].(map[string]any)["dtype"] = "F8_E4M3"
	b, _ = json.Marshal(raw)
	os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644)
	rep, err := Audit(context.Background(), dir, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, f := range rep.Findings {
		if f.Kind == KindUnknownKind {
			msgs = append(msgs, f.Tensor+": "+f.Message)
		}
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{`"q3"`, `"teapot"`, `"F8_E4M3"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("no finding mentions %s: %v", want, msgs)
		}
	}
}

func TestManifestGarbage(t *testing.T) {
	cases := map[string]string{
		"not json":         "this is not json",
		"earlier dgq pack": `{"format_version": 1, "blob": "model.dgq.bin", "tensors": []}`,
		"missing version":  `{"profile": "q4", "source_model": "", "blob_file": "model.dgq.bin", "tensors": []}`,
		"missing tensors":  `{"version": 1, "profile": "q4", "source_model": "", "blob_file": "model.dgq.bin"}`,
		"tensor no kind":   `{"version": 1, "profile": "q4", "source_model": "", "blob_file": "b", "tensors": [{"name": "a", "dtype": "BF16", "shape": [], "offset": 0, "byte_len": 0}]}`,
		"trailing data":    `{"version": 1} {}`,
		"wrong type":       `{"version": "one"}`,
		"empty":            ``,
		"array":            `[]`,
		"tensor garbage":   `{"version": 1, "tensors": [1, 2, 3]}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			dir := goodPack(t)
			os.WriteFile(filepath.Join(dir, ManifestName), []byte(body), 0o644)
			if _, err := Open(dir); !errors.Is(err, ErrManifest) {
				t.Fatalf("Open: %v", err)
			}
			rep, err := Audit(context.Background(), dir, AuditOptions{})
			if err != nil || rep.OK || rep.Findings[0].Kind != KindManifest {
				t.Fatalf("audit: %v %+v", err, rep)
			}
		})
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrManifest) {
		t.Fatalf("Open of a directory without a manifest: %v", err)
	}
}

// Damaged blobs and side files: every problem is reported, by name.
func TestAuditReportsAllDamage(t *testing.T) {
	dir := goodPack(t)
	m, _ := ReadManifest(dir)
	blobPath := filepath.Join(dir, BlobName)
	b, _ := os.ReadFile(blobPath)
	victims := []Tensor{m.Tensors[0], m.Tensors[tensorIndex(m, layout.Experts, 2)]}
	for _, v := range victims {
		b[v.Offset+v.Size/2] ^= 0x40
	}
	os.WriteFile(blobPath, b, 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
	os.Remove(filepath.Join(dir, "generation_config.json"))
	rep, err := Audit(context.Background(), dir, AuditOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	files := 0
	for _, f := range rep.Findings {
		if f.Kind == KindDigest {
			named[f.Tensor] = true
		}
		if f.Kind == KindFile {
			files++
		}
	}
	for _, v := range victims {
		if !named[v.Name] {
			t.Errorf("flipped byte in %s not reported: %v", v.Name, rep.Findings)
		}
	}
	if len(named) != len(victims) || files != 2 {
		t.Errorf("findings %v: want %d digest and 2 file findings", rep.Findings, len(victims))
	}
}

func TestAuditTruncatedAndMissingBlob(t *testing.T) {
	dir := goodPack(t)
	blobPath := filepath.Join(dir, BlobName)
	st, _ := os.Stat(blobPath)
	os.Truncate(blobPath, st.Size()/2)
	rep, _ := Audit(context.Background(), dir, AuditOptions{})
	kinds := map[string]int{}
	for _, f := range rep.Findings {
		kinds[f.Kind]++
	}
	if rep.OK || kinds[KindBlob] == 0 || kinds[KindBounds] == 0 {
		t.Fatalf("truncated blob: %v", rep.Findings)
	}
	if _, err := Open(dir); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open of truncated pack: %v", err)
	}
	os.Remove(blobPath)
	rep, _ = Audit(context.Background(), dir, AuditOptions{})
	if rep.OK || rep.Findings[0].Kind != KindBlob {
		t.Fatalf("missing blob: %v", rep.Findings)
	}
	if _, err := Open(dir); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open of pack without blob: %v", err)
	}
}

func FuzzParseManifest(f *testing.F) {
	out := filepath.Join(f.TempDir(), "pack")
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: tinySnapshot(f), Out: out, Profile: "nvfp4"}); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, ManifestName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version":1,"profile":"q4","source_model":"","blob_file":"x","tensors":[{"name":"a","class":"x","kind":"q4_block","dtype":"BF16","shape":[-1,32],"offset":-64,"byte_len":9223372036854775807}]}`))
	f.Add([]byte(`{"version":3,"profile":"nvfp4","source_model":"","blob_file":"x","expert_split":16384,"local_expert_split":0,"base_model":{"repo":"a/b","revision":"c"},"external_files":{"s":{"role":"hf_safetensors","path":"s","expected_size":-1}},"custom_classes":{"attn":"q4_block"},"tensors":[{"name":"model.decoder.layers.0.experts.down_proj","kind":"nvfp4_block","dtype":"F32","shape":[9223372036854775807,9223372036854775807],"offset":0,"byte_len":0,"source":{"kind":"external","file":"","offset":-1}}],"dgq":{"blob_size":5,"local_blob_size":-3,"files":[{"name":"../x"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		_ = Validate(m, int64(len(data)))
		_ = Validate(m, -1)
		_ = summarize(m)
	})
}
