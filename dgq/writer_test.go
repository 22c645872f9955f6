package dgq

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// TestReportPathRefusals: every --report path that could destroy data or
// cannot be written is refused before any work, with nothing written and the
// file it pointed at unchanged.
func TestReportPathRefusals(t *testing.T) {
	root := filepath.Join(t.TempDir(), "hub")
	snap, err := testmodel.WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DGQ_HF_HOME", root)
	work := t.TempDir()
	out := filepath.Join(work, "pack")
	shard := filepath.Join(snap, "model-00001-of-00004.safetensors")
	if _, err := os.Stat(shard); err != nil {
		entries, _ := os.ReadDir(snap)
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".safetensors" {
				shard = filepath.Join(snap, e.Name())
				break
			}
		}
	}
	before, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(work, "ro")
	os.Mkdir(readOnly, 0o555)
	for name, report := range map[string]string{
		"a source shard":       shard,
		"inside the cache":     filepath.Join(root, "report.json"),
		"the new manifest":     filepath.Join(out, ManifestName),
		"a directory":          work,
		"an unwritable folder": filepath.Join(readOnly, "r.json"),
		"a missing folder":     filepath.Join(work, "no", "such", "r.json"),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "an unwritable folder" && os.Geteuid() == 0 {
				t.Skip("root writes into a 0555 directory")
			}
			_, err := Quantize(context.Background(), QuantizeOptions{Source: "dgq-test/diffusiongemma-tiny", Out: out, Profile: "q4", ReportPath: report})
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("Quantize with --report %s: %v", report, err)
			}
			assertNoOutput(t, out)
			if after, _ := os.ReadFile(shard); !bytes.Equal(after, before) {
				t.Fatal("the source shard changed")
			}
		})
	}
	// A plain report path works and the report is complete.
	rp := filepath.Join(work, "report.json")
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: "dgq-test/diffusiongemma-tiny", Out: out, Profile: "q4", ReportPath: rp}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(rp); err != nil || len(b) == 0 {
		t.Fatalf("report: %v", err)
	}
}

// TestPackWriterNeverPublishesInvalid: a manifest that breaks a rule is not
// published, and nothing is left at the output.
func TestPackWriterNeverPublishesInvalid(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pack")
	w, err := NewPackWriter(out, false, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	m := &Manifest{Version: VersionAffine, Profile: "q4", Blob: BlobName,
		Tensors: []Tensor{{Name: "model.decoder.norm.weight", Format: codecs.Raw, DType: codecs.BF16, Shape: []int64{16}, Offset: 8, Size: 32}}}
	err = w.Publish(m)
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("Publish of a misaligned tensor: %v", err)
	}
	w.Abort()
	assertNoOutput(t, out)
}
