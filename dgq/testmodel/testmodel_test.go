package testmodel

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"
)

// The blob names in hub.json are content hashes: sha256 for safetensors
// (LFS) files, git blob sha1 for the small files. Checking them proves the
// embedded files are the ones the fixture was made with.
func TestBlobNamesAreContentHashes(t *testing.T) {
	h := HubInfo()
	if len(h.Blobs) != len(FileNames()) {
		t.Fatalf("hub.json names %d blobs, snapshot has %d files", len(h.Blobs), len(FileNames()))
	}
	for _, name := range FileNames() {
		b, err := ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if strings.HasSuffix(name, ".safetensors") {
			s := sha256.Sum256(b)
			got = hex.EncodeToString(s[:])
		} else {
			s := sha1.Sum(append([]byte(fmt.Sprintf("blob %d\x00", len(b))), b...))
			got = hex.EncodeToString(s[:])
		}
		if got != h.Blobs[name] {
			t.Errorf("%s: content hash %s, hub.json says %s", name, got, h.Blobs[name])
		}
	}
}

func TestWriteHubCacheLayout(t *testing.T) {
	root := t.TempDir()
	snap, err := WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	h := HubInfo()
	ref, err := os.ReadFile(filepath.Join(root, "models--dgq-test--diffusiongemma-tiny", "refs", "main"))
	if err != nil || string(ref) != h.Revision {
		t.Fatalf("refs/main = %q, %v", ref, err)
	}
	for _, name := range FileNames() {
		p := filepath.Join(snap, name)
		target, err := os.Readlink(p)
		if err != nil {
			t.Fatalf("%s is not a symlink: %v", name, err)
		}
		if filepath.IsAbs(target) || !strings.HasPrefix(target, "../../blobs/") {
			t.Errorf("%s links to %q, want a relative link into blobs/", name, target)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ReadFile(name)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: content differs through the symlink", name)
		}
	}
}

func TestWriteSnapshot(t *testing.T) {
	dir, err := WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 9 {
		t.Fatalf("snapshot has %d entries (%v), want 9", len(entries), err)
	}
	if _, err := ReadReference("reference.safetensors"); err != nil {
		t.Fatal(err)
	}
}

func TestEmbedDigest(t *testing.T) {
	idx, _ := ReadFile("model.safetensors.index.json")
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(idx, &index); err != nil {
		t.Fatal(err)
	}
	const name = "model.decoder.embed_tokens.weight"
	shard, _ := ReadFile(index.WeightMap[name])
	n := binary.LittleEndian.Uint64(shard)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(shard[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Offsets [2]int `json:"data_offsets"`
	}
	json.Unmarshal(header[name], &entry)
	data := shard[8+int(n)+entry.Offsets[0] : 8+int(n)+entry.Offsets[1]]
	sum := blake3.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != EmbedDigest {
		t.Fatalf("embed digest %s, EmbedDigest says %s", got, EmbedDigest)
	}
}

// WriteReference writes both reference files byte for byte, creating the
// folder; a path under a regular file fails.
func TestWriteReference(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "ref")
	if err := WriteReference(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"reference.json", "reference.safetensors"} {
		want, err := ReadReference(n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want the embedded %d bytes", n, len(got), err, len(want))
		}
	}
	if err := WriteReference(filepath.Join(dir, "reference.json", "x")); err == nil {
		t.Error("WriteReference under a file: no error")
	}
}
