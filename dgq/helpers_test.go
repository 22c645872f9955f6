package dgq

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

// tinySnapshot writes the embedded tiny checkpoint as a plain snapshot.
func tinySnapshot(t testing.TB) string {
	t.Helper()
	dir, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// wideSnapshot is the held-out-shape checkpoint in testdata, in its real
// Hugging Face cache layout (snapshot entries are symlinks into blobs/).
func wideSnapshot(t testing.TB) string {
	t.Helper()
	repo := filepath.Join("..", "testdata", "wide", "hub", "models--dgq-test--diffusiongemma-wide")
	rev, err := os.ReadFile(filepath.Join(repo, "refs", "main"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(repo, "snapshots", strings.TrimSpace(string(rev)))
}

type namedTensor struct {
	name  string
	dtype codecs.DType
	shape []int64
	data  []byte
}

// writeShards writes tensors into a snapshot directory as nShards shards
// (tensor i goes to shard assign(i)) plus model.safetensors.index.json,
// using the safetensors library.
func writeShards(t testing.TB, dir string, tensors []namedTensor, nShards int, assign func(i int) int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	groups := make([]map[string]testmodel.View, nShards)
	for i := range groups {
		groups[i] = map[string]testmodel.View{}
	}
	weightMap := map[string]string{}
	var total int64
	for i, nt := range tensors {
		s := assign(i)
		shape := make([]uint64, len(nt.shape))
		for j, d := range nt.shape {
			shape[j] = uint64(d)
		}
		groups[s][nt.name] = testmodel.View{DT: nt.dtype, Dims: shape, Bytes: nt.data}
		weightMap[nt.name] = fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, nShards)
		total += int64(len(nt.data))
	}
	for s, g := range groups {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, nShards)))
		if err != nil {
			t.Fatal(err)
		}
		if err := safetensors.SerializeToWriter(g, map[string]string{"format": "pt"}, f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readTensors loads every tensor of a snapshot into memory.
func readTensors(t testing.TB, dir string) []namedTensor {
	t.Helper()
	snap, err := hfcache.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var out []namedTensor
	for _, r := range snap.Tensors() {
		out = append(out, namedTensor{name: r.Name, dtype: r.DType, shape: r.Shape, data: append([]byte(nil), r.Bytes()...)})
	}
	return out
}

// copySide copies the non-weight files of a snapshot.
func copySide(t testing.TB, src, dst string) {
	t.Helper()
	for _, n := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// reshard rewrites a snapshot with its tensors spread over nShards shards in
// a scrambled assignment (and hence another file order and other offsets).
func reshard(t testing.TB, src string, nShards int, seed uint64) string {
	t.Helper()
	tensors := readTensors(t, src)
	r := rand.New(rand.NewPCG(seed, 7))
	r.Shuffle(len(tensors), func(i, j int) { tensors[i], tensors[j] = tensors[j], tensors[i] })
	dst := filepath.Join(t.TempDir(), "resharded")
	writeShards(t, dst, tensors, nShards, func(i int) int { return (i * 7919) % nShards })
	copySide(t, src, dst)
	return dst
}

// synthSnapshot writes a checkpoint for the config with the exact tensor
// names and shapes layout.ExpectedText lists, filled with seeded bf16 values.
func synthSnapshot(t testing.TB, configJSON string, seed uint64) string {
	t.Helper()
	cfg, err := layout.ParseConfig([]byte(configJSON))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	var tensors []namedTensor
	for _, e := range layout.ExpectedText(cfg) {
		n := int64(1)
		for _, d := range e.Shape {
			n *= d
		}
		data := make([]byte, 2*n)
		for i := int64(0); i < n; i++ {
			v := float32(r.NormFloat64() * 0.02)
			binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
		}
		tensors = append(tensors, namedTensor{name: e.Name, dtype: codecs.BF16, shape: e.Shape, data: data})
	}
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].name < tensors[j].name })
	dir := filepath.Join(t.TempDir(), "synth")
	writeShards(t, dir, tensors, 2, func(i int) int { return i % 2 })
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(configJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// smallConfig is MODEL_SPEC §6.1's suggestion: expert FF 16, so the expert
// down projection (K = 16) cannot be stored in q4/q5/q6.
const smallConfig = `{
 "model_type": "diffusion_gemma", "canvas_length": 8, "tie_word_embeddings": true,
 "text_config": {
  "vocab_size": 128, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "num_attention_heads": 4, "head_dim": 8, "num_key_value_heads": 2,
  "global_head_dim": 16, "num_global_key_value_heads": 1, "sliding_window": 6,
  "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 16,
  "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": 30.0,
  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
   "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}},
  "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1, "max_position_embeddings": 128
 },
 "vision_config": {"model_type": "gemma4_vision", "hidden_size": 16}
}`

// assertNoOutput checks that neither out nor any staging directory beside it exists.
func assertNoOutput(t testing.TB, out string) {
	t.Helper()
	if _, err := os.Lstat(out); err == nil {
		t.Fatalf("output %s exists after a failed run", out)
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".dgq-tmp-") {
			t.Fatalf("staging directory %s left behind", e.Name())
		}
	}
}

func fileSHA(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return digestBytes(b)
}
