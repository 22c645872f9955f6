package testmodel

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed tiny/snapshot tiny/hub.json tiny/reference
var files embed.FS

// EmbedDigest is the BLAKE3-256 of the tiny checkpoint's
// model.decoder.embed_tokens.weight bytes: the digest every pack made from it
// records for that (always raw) tensor, by which a pack is recognized as made
// from this checkpoint whatever its profile or source path.
const EmbedDigest = "cf0fe35deb2c54505983db971e19cfa9ab2d369e673c0cbcd5ba089bdfca2428"

// Hub describes the cache entry of the tiny checkpoint.
type Hub struct {
	Repo     string            `json:"repo"`     // "dgq-test/diffusiongemma-tiny"
	Revision string            `json:"revision"` // the 40-hex commit of the snapshot
	Ref      string            `json:"ref"`      // the branch that points at it ("main")
	Blobs    map[string]string `json:"blobs"`    // snapshot file name → blob name
}

// HubInfo returns the repo, revision and blob names of the tiny checkpoint.
func HubInfo() Hub {
	b, err := files.ReadFile("tiny/hub.json")
	if err != nil {
		panic("testmodel: embedded hub.json missing: " + err.Error())
	}
	var h Hub
	if err := json.Unmarshal(b, &h); err != nil {
		panic("testmodel: embedded hub.json: " + err.Error())
	}
	return h
}

// FileNames lists the snapshot's files in sorted order.
func FileNames() []string {
	entries, err := fs.ReadDir(files, "tiny/snapshot")
	if err != nil {
		panic("testmodel: embedded snapshot missing: " + err.Error())
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// ReadFile returns one snapshot file (e.g. "config.json").
func ReadFile(name string) ([]byte, error) {
	return files.ReadFile(path.Join("tiny/snapshot", name))
}

// ReadReference returns one reference file ("reference.json",
// "reference.safetensors" or "tokenizer_reference.json").
func ReadReference(name string) ([]byte, error) {
	return files.ReadFile(path.Join("tiny/reference", name))
}

// WriteReference writes the transformers reference of the parity scenarios
// (reference.json and reference.safetensors) into dir, created if needed.
func WriteReference(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("testmodel: %w", err)
	}
	for _, n := range []string{"reference.json", "reference.safetensors"} {
		b, err := ReadReference(n)
		if err != nil {
			return fmt.Errorf("testmodel: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return fmt.Errorf("testmodel: %w", err)
		}
	}
	return nil
}

// WriteSnapshot writes the snapshot as plain files into dir (created if
// needed) and returns dir.
func WriteSnapshot(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testmodel: %w", err)
	}
	for _, name := range FileNames() {
		b, err := ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("testmodel: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", fmt.Errorf("testmodel: %w", err)
		}
	}
	return dir, nil
}

// WriteHubCache lays the checkpoint out under the hub cache root exactly as
// huggingface_hub does: models--ORG--NAME/blobs/<blob>, refs/<ref> holding
// the revision, and snapshots/<revision>/<file> as relative symlinks into
// blobs/. It returns the snapshot directory.
func WriteHubCache(root string) (string, error) {
	h := HubInfo()
	repoDir := filepath.Join(root, "models--"+strings.ReplaceAll(h.Repo, "/", "--"))
	snap := filepath.Join(repoDir, "snapshots", h.Revision)
	for _, d := range []string{filepath.Join(repoDir, "blobs"), filepath.Join(repoDir, "refs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("testmodel: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(repoDir, "refs", h.Ref), []byte(h.Revision), 0o644); err != nil {
		return "", fmt.Errorf("testmodel: %w", err)
	}
	for _, name := range FileNames() {
		blob, ok := h.Blobs[name]
		if !ok {
			return "", fmt.Errorf("testmodel: no blob name for %s", name)
		}
		b, err := ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("testmodel: %w", err)
		}
		if err := os.WriteFile(filepath.Join(repoDir, "blobs", blob), b, 0o644); err != nil {
			return "", fmt.Errorf("testmodel: %w", err)
		}
		if err := os.Symlink(path.Join("..", "..", "blobs", blob), filepath.Join(snap, name)); err != nil {
			return "", fmt.Errorf("testmodel: %w", err)
		}
	}
	return snap, nil
}
