// Command corruptgen writes the corrupt-pack corpus of testdata/corrupt: one
// small valid pack and damaged copies of it, each damaged in one documented
// way (plus one with several faults at once), and a layered pack whose
// Hugging Face base has changed. expected.json lists, per case, the finding
// kinds audit must report. Run from the repository root:
//
//	go run ./dgq/internal/corruptgen testdata/corrupt
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgq-dev/dgq/dgq"
)

// config is a one-layer DiffusionGemma small enough that each pack is a few
// tens of kilobytes, with every class present and q4-compatible shapes.
const config = `{
 "model_type": "diffusion_gemma", "canvas_length": 8, "tie_word_embeddings": true,
 "text_config": {
  "vocab_size": 64, "hidden_size": 32, "intermediate_size": 32, "num_hidden_layers": 1,
  "layer_types": ["full_attention"], "num_attention_heads": 2, "head_dim": 16, "num_key_value_heads": 1,
  "global_head_dim": 16, "num_global_key_value_heads": 1, "sliding_window": 6,
  "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32,
  "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": 30.0,
  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
   "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}},
  "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1, "max_position_embeddings": 128
 }
}`

const (
	baseRepo = "dgq-test/corrupt-base"
	baseRev  = "c0ffee0000000000000000000000000000000001"
)

type expectation struct {
	Kinds  []string `json:"kinds"`            // finding kinds audit must report (at least these)
	Tensor string   `json:"tensor,omitempty"` // a tensor a finding must name
	Note   string   `json:"note"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: corruptgen OUTDIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "corruptgen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	ctx := context.Background()
	hub := filepath.Join(out, "hub")
	snap := filepath.Join(hub, "models--"+strings.ReplaceAll(baseRepo, "/", "--"), "snapshots", baseRev)
	if _, err := dgq.Synthesize(ctx, dgq.SynthOptions{Out: snap, Config: []byte(config), Seed: 11, ShardBytes: 40_000}); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(filepath.Dir(filepath.Dir(snap)), "refs"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(snap)), "refs", "main"), []byte(baseRev), 0o644); err != nil {
		return err
	}
	good := filepath.Join(out, "good")
	if _, err := dgq.Quantize(ctx, dgq.QuantizeOptions{Source: snap, Out: good, Profile: "q4"}); err != nil {
		return err
	}
	stripSource(good)
	os.Setenv("DGQ_HF_HOME", hub)
	layered := filepath.Join(out, "stale-external")
	if _, err := dgq.Quantize(ctx, dgq.QuantizeOptions{Source: baseRepo, Out: layered, Profile: "q4", Overlay: true}); err != nil {
		return err
	}
	stripSource(layered)
	m, err := dgq.ReadManifest(good)
	if err != nil {
		return err
	}
	expert, norm := "", ""
	for _, t := range m.Tensors {
		if expert == "" && t.Class.String() == "experts" {
			expert = t.Name
		}
		if norm == "" && t.Class.String() == "norm" {
			norm = t.Name
		}
	}
	exp := map[string]expectation{}
	add := func(name string, e expectation, damage func(dir string) error) error {
		dir := filepath.Join(out, name)
		if err := copyDir(good, dir); err != nil {
			return err
		}
		exp[name] = e
		return damage(dir)
	}
	cases := []struct {
		name   string
		e      expectation
		damage func(string) error
	}{
		{"truncated-blob", expectation{Kinds: []string{"blob", "bounds"}, Note: "blob cut to half its size"}, func(d string) error {
			return truncate(filepath.Join(d, dgq.BlobName), 0.5)
		}},
		{"flipped-byte", expectation{Kinds: []string{"digest"}, Tensor: expert, Note: "one byte of an expert tensor flipped"}, func(d string) error {
			return flip(d, m, expert)
		}},
		{"misaligned-offset", expectation{Kinds: []string{"alignment"}, Tensor: norm, Note: "a tensor offset moved by 8 bytes"}, func(d string) error {
			return editTensor(d, norm, func(t map[string]any) { t["offset"] = t["offset"].(float64) + 8 })
		}},
		{"overlapping-tensors", expectation{Kinds: []string{"overlap"}, Note: "a tensor moved onto its predecessor"}, func(d string) error {
			return editManifest(d, func(j map[string]any) {
				ts := j["tensors"].([]any)
				ts[3].(map[string]any)["offset"] = ts[2].(map[string]any)["offset"]
			})
		}},
		{"offset-near-2p63", expectation{Kinds: []string{"bounds"}, Tensor: norm, Note: "offset 2^63 - 64: offset + size overflows int64"}, func(d string) error {
			return editManifestRaw(d, func(s string) string {
				return replaceOffset(s, m, norm, fmt.Sprint(int64(math.MaxInt64-63)))
			})
		}},
		{"duplicate-tensor", expectation{Kinds: []string{"name"}, Note: "two entries with the same name"}, func(d string) error {
			return editManifest(d, func(j map[string]any) {
				ts := j["tensors"].([]any)
				ts[5].(map[string]any)["name"] = ts[4].(map[string]any)["name"]
			})
		}},
		{"unknown-format", expectation{Kinds: []string{"unknown_kind"}, Tensor: expert, Note: "kind q3_block"}, func(d string) error {
			return editTensor(d, expert, func(t map[string]any) { t["kind"] = "q3_block" })
		}},
		{"future-version", expectation{Kinds: []string{"version"}, Note: "version 99"}, func(d string) error {
			return editManifest(d, func(j map[string]any) { j["version"] = 99 })
		}},
		{"dgq-only-kind-as-engine", expectation{Kinds: []string{"version"}, Note: "experts relabelled q5_block (dgq only) under version 1, which promises the engine can run the pack"}, func(d string) error {
			return editManifest(d, func(j map[string]any) {
				for _, t := range j["tensors"].([]any) {
					if tm := t.(map[string]any); tm["class"] == "experts" {
						tm["kind"] = "q5_block"
						tm["byte_len"] = tm["byte_len"].(float64) / 20 * 24
					}
				}
			})
		}},
		{"nonzero-padding", expectation{Kinds: []string{"padding"}, Note: "a byte between two tensors (the padding before the expert split) set to 0x5a"}, func(d string) error {
			return poke(d, *m.ExpertSplit-1, 0x5a)
		}},
		{"earlier-dgq-format", expectation{Kinds: []string{"manifest"}, Note: "a manifest of dgq's earlier planar format (format_version 2): refused, naming it"}, func(d string) error {
			return os.WriteFile(filepath.Join(d, dgq.ManifestName), []byte(`{"format_version": 2, "generator": "dgq 0.1.0-dev", "profile": "q4", "blob": "model.dgq.bin", "blob_size": 0, "expert_split": 0, "tensors": [], "external_files": [], "files": []}`+"\n"), 0o644)
		}},
		{"missing-manifest", expectation{Kinds: []string{"manifest"}, Note: "model.dgq.json deleted"}, func(d string) error {
			return os.Remove(filepath.Join(d, dgq.ManifestName))
		}},
		{"garbage-manifest", expectation{Kinds: []string{"manifest"}, Note: "model.dgq.json replaced by binary garbage"}, func(d string) error {
			return os.WriteFile(filepath.Join(d, dgq.ManifestName), []byte("\x00\xffGGUF\x03\x00not a manifest"), 0o644)
		}},
		{"missing-blob", expectation{Kinds: []string{"blob"}, Note: "model.dgq.bin deleted"}, func(d string) error {
			return os.Remove(filepath.Join(d, dgq.BlobName))
		}},
		{"orphan-blob", expectation{Kinds: []string{"file"}, Note: "an extra model.dgq.old.bin nobody references"}, func(d string) error {
			return os.WriteFile(filepath.Join(d, "model.dgq.old.bin"), make([]byte, 4096), 0o644)
		}},
		{"several-faults", expectation{Kinds: []string{"digest", "alignment", "file"}, Note: "a flipped byte, a misaligned offset and an orphan blob: all three reported"}, func(d string) error {
			if err := flip(d, m, expert); err != nil {
				return err
			}
			if err := editTensor(d, norm, func(t map[string]any) { t["offset"] = t["offset"].(float64) + 8 }); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(d, "model.dgq.old.bin"), []byte("x"), 0o644)
		}},
	}
	for _, c := range cases {
		if err := add(c.name, c.e, c.damage); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	// The layered pack's base shard changes after the pack was made.
	lm, _ := dgq.ReadManifest(layered)
	shard := filepath.Join(snap, lm.ExternalFiles[0].Path)
	b, err := os.ReadFile(shard)
	if err != nil {
		return err
	}
	i := strings.Index(string(b), `"format":"pt"`)
	copy(b[i:], `"format":"tf"`)
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		return err
	}
	exp["stale-external"] = expectation{Kinds: []string{"stale"}, Note: "layered pack; its base shard's header changed (same length); needs DGQ_HF_HOME=testdata/corrupt/hub"}
	exp["good"] = expectation{Kinds: []string{}, Note: "the undamaged pack: audits clean"}
	data, _ := json.MarshalIndent(exp, "", "  ")
	return os.WriteFile(filepath.Join(out, "expected.json"), append(data, '\n'), 0o644)
}

// stripSource removes where the pack was made from (a temporary path), so
// the corpus does not change with the machine that generates it.
func stripSource(dir string) {
	editManifest(dir, func(j map[string]any) {
		j["source_model"] = ""
		if ext, ok := j["dgq"].(map[string]any); ok {
			delete(ext, "source")
		}
	})
}

func editManifest(dir string, f func(map[string]any)) error {
	p := filepath.Join(dir, dgq.ManifestName)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	f(j)
	b, _ = json.MarshalIndent(j, "", "  ")
	return os.WriteFile(p, append(b, '\n'), 0o644)
}

func editManifestRaw(dir string, f func(string) string) error {
	p := filepath.Join(dir, dgq.ManifestName)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return os.WriteFile(p, []byte(f(string(b))), 0o644)
}

// replaceOffset rewrites one tensor's offset in the manifest text (JSON
// numbers through float64 would lose the exact value near 2^63).
func replaceOffset(s string, m *dgq.Manifest, name, value string) string {
	for _, t := range m.Tensors {
		if t.Name == name {
			i := strings.Index(s, `"name": "`+name+`"`)
			j := i + strings.Index(s[i:], fmt.Sprintf(`"offset": %d`, t.Offset))
			return s[:j] + `"offset": ` + value + s[j+len(fmt.Sprintf(`"offset": %d`, t.Offset)):]
		}
	}
	return s
}

func editTensor(dir, name string, f func(map[string]any)) error {
	return editManifest(dir, func(j map[string]any) {
		for _, t := range j["tensors"].([]any) {
			if tm := t.(map[string]any); tm["name"] == name {
				f(tm)
			}
		}
	})
}

func flip(dir string, m *dgq.Manifest, name string) error {
	p := filepath.Join(dir, dgq.BlobName)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	for _, t := range m.Tensors {
		if t.Name == name {
			b[t.Offset+t.Size/2] ^= 0x10
		}
	}
	return os.WriteFile(p, b, 0o644)
}

// poke sets one byte of the blob.
func poke(dir string, off int64, v byte) error {
	f, err := os.OpenFile(filepath.Join(dir, dgq.BlobName), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt([]byte{v}, off)
	return err
}

func truncate(p string, frac float64) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	return os.Truncate(p, int64(float64(st.Size())*frac))
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
