package enginepack

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// goldenManifest is what the engine's serializer writes for sampleManifest,
// written out by hand from its format rules.
const goldenManifest = `{
  "version": 4,
  "profile": "q4",
  "source_model": "model/transformer",
  "blob_file": "model.dgq.bin",
  "expert_split": 16384,
  "local_expert_split": 0,
  "base_model": {
    "repo": "google/diffusiongemma-26B-A4B-it",
    "revision": "0f28bc42f588fbd8f71e08102b1c3960298a1358"
  },
  "external_files": {
    "a.safetensors": {
      "role": "hf_safetensors",
      "path": "a.safetensors",
      "expected_size": 4800000000,
      "header_sha256": "aaaa"
    },
    "b.bin": {
      "role": "pack_bin",
      "path": "b.bin",
      "expected_size": 7
    }
  },
  "custom_classes": {
    "experts.down": "nvfp4_block",
    "experts.gate_up": "nvfp4_block"
  },
  "tensors": [
    {
      "name": "model.decoder.layer_scalar",
      "kind": "raw",
      "dtype": "BF16",
      "shape": [],
      "offset": 0,
      "byte_len": 2,
      "source": {
        "kind": "external",
        "file": "a.safetensors",
        "offset": 0
      }
    },
    {
      "name": "model.decoder.layers.0.experts.gate_up_proj",
      "kind": "nvfp4_block",
      "dtype": "BF16",
      "shape": [
        128,
        352,
        2816
      ],
      "offset": 16384,
      "byte_len": 1024,
      "source": {
        "kind": "local",
        "local_offset": 0
      }
    }
  ]
}`

func sampleManifest() *Manifest {
	split, local := uint64(16384), uint64(0)
	return &Manifest{
		Version: 4, Profile: "q4", SourceModel: "model/transformer", BlobFile: BlobFile,
		ExpertSplit: &split, LocalExpertSplit: &local,
		BaseModel: &BaseModel{Repo: "google/diffusiongemma-26B-A4B-it", Revision: "0f28bc42f588fbd8f71e08102b1c3960298a1358"},
		ExternalFiles: map[string]ExternalFile{
			"b.bin":         {Role: RolePackBin, Path: "b.bin", ExpectedSize: 7},
			"a.safetensors": {Role: RoleHFSafetensors, Path: "a.safetensors", ExpectedSize: 4800000000, HeaderSHA256: "aaaa"},
		},
		CustomClasses: map[string]string{"experts.gate_up": KindNVFP4, "experts.down": KindNVFP4},
		Tensors: []TensorEntry{
			{Name: "model.decoder.layer_scalar", Kind: KindRaw, DType: "BF16", Shape: []int64{}, ByteLen: 2,
				Source: &Source{Kind: "external", File: "a.safetensors"}},
			{Name: "model.decoder.layers.0.experts.gate_up_proj", Kind: KindNVFP4, DType: "BF16",
				Shape: []int64{128, 352, 2816}, Offset: 16384, ByteLen: 1024, Source: &Source{Kind: "local"}},
		},
	}
}

// TestMarshalManifestGolden: exact bytes, and a round trip through
// encoding/json back to equal values.
func TestMarshalManifestGolden(t *testing.T) {
	m := sampleManifest()
	got := MarshalManifest(m)
	if string(got) != goldenManifest {
		t.Fatalf("got\n%s\nwant\n%s", got, goldenManifest)
	}
	var back Manifest
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, m) {
		t.Fatalf("round trip:\n%+v\n%+v", back, *m)
	}
	if gi := goIndent(t, m); !bytes.Equal(gi, got) {
		t.Fatalf("encoding/json disagrees:\n%s", gi)
	}
}

// TestMarshalManifestMinimal: optional keys vanish, an empty tensor list
// is [].
func TestMarshalManifestMinimal(t *testing.T) {
	m := &Manifest{Version: 1, Profile: "q6", SourceModel: "s", BlobFile: BlobFile, Tensors: []TensorEntry{},
		ExternalFiles: map[string]ExternalFile{}, CustomClasses: map[string]string{}}
	want := "{\n  \"version\": 1,\n  \"profile\": \"q6\",\n  \"source_model\": \"s\",\n  \"blob_file\": \"model.dgq.bin\",\n  \"tensors\": []\n}"
	if got := string(MarshalManifest(m)); got != want {
		t.Fatalf("got %q", got)
	}
}

// TestMarshalManifestEscapes: serde_json's string escapes.
func TestMarshalManifestEscapes(t *testing.T) {
	m := &Manifest{SourceModel: "a\"b\\c\bd\fe\nf\rg\th\x01i\x1fj\x7fk<&>\u00e9\u2028", Tensors: []TensorEntry{}}
	want := `"source_model": "a\"b\\c\bd\fe\nf\rg\th\u0001i\u001fj` + "\x7fk<&>\u00e9\u2028" + `"`
	if got := string(MarshalManifest(m)); !bytes.Contains([]byte(got), []byte(want)) {
		t.Fatalf("got %s", got)
	}
}

// goIndent is encoding/json's rendering: for plain strings it matches the
// engine's format, which makes it an independent check.
func goIndent(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
