package dgq

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"

	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

// SynthOptions configures Synthesize.
type SynthOptions struct {
	Out        string
	Layers     int // number of decoder layers (the real model has 30)
	Seed       uint64
	ShardBytes int64 // maximum shard size, MinShardBytes…MaxShardBytes; 0: SynthShardBytes (5 GB, like the published checkpoint)
	Force      bool
	Progress   Progress
	// Config, when set, is a config.json to synthesize instead of the
	// real model's (Layers is then ignored): any shapes, e.g. tiny test packs.
	Config []byte
}

// Bounds of SynthOptions.
const (
	MaxSynthLayers  = 30            // the real model's decoder layers
	SynthShardBytes = 5_000_000_000 // the published checkpoint's shards
	// MinShardBytes and MaxShardBytes bound ShardBytes: smaller shards
	// only multiply files (a shard always holds at least one tensor).
	MinShardBytes = 32 << 10
	MaxShardBytes = 1 << 40
)

// check refuses the options out of range, and an output inside the
// Hugging Face cache (dgq never writes there), before anything is written.
func (o SynthOptions) check() error {
	errs := []error{
		limits.NonNegative("--shard-size", o.ShardBytes, fmt.Sprintf("0 is %d bytes, the published checkpoint's", int64(SynthShardBytes))),
	}
	if o.ShardBytes != 0 {
		errs = append(errs, limits.Min("--shard-size", o.ShardBytes, MinShardBytes),
			limits.Max("--shard-size", o.ShardBytes, MaxShardBytes, "the maximum of 1 TiB"))
	}
	if o.Config == nil {
		errs = append(errs, limits.Min("--layers", o.Layers, 1),
			limits.Max("--layers", o.Layers, MaxSynthLayers, fmt.Sprintf("the real model's %d layers", MaxSynthLayers)))
	}
	if err := limits.First(ErrUsage, errs...); err != nil {
		return err
	}
	if hfcache.IsInCache(o.Out) {
		return fmt.Errorf("%w: output %s lies inside the Hugging Face cache; dgq never writes there, choose another -o", ErrUsage, o.Out)
	}
	return nil
}

// SynthResult describes a synthesized snapshot.
type SynthResult struct {
	Dir     string
	Tensors int
	Shards  int
	Bytes   int64 // tensor bytes written
}

// Synthesize writes a Hugging Face snapshot with the real DiffusionGemma
// tensor names and dimensions (hidden 2816, 128 experts × 704, dense 2112,
// 16 heads, sliding 8×256, full 2×512 with K=V, vocab 262144) and fewer
// layers, filled with seeded heavy-tailed bf16 values (Student-t with 3
// degrees of freedom, std 0.02). It is a development tool for benchmarks at
// the real shapes: streaming, bounded memory, shards of up to ShardBytes.
func Synthesize(ctx context.Context, o SynthOptions) (*SynthResult, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.ShardBytes == 0 {
		o.ShardBytes = SynthShardBytes
	}
	if err := CheckOutput(o.Out, o.Force); err != nil {
		return nil, err
	}
	cfgJSON := o.Config
	if cfgJSON == nil {
		cfgJSON = SynthConfig(o.Layers)
	}
	cfg, err := layout.ParseConfig(cfgJSON)
	if err != nil {
		return nil, fmt.Errorf("dgq: synth config: %w", err)
	}
	tensors := layout.ExpectedText(cfg)
	sort.Slice(tensors, func(i, j int) bool { return layout.NaturalCompare(tensors[i].Name, tensors[j].Name) < 0 })
	shards := shardTensors(tensors, o.ShardBytes)
	st, err := NewStaging(o.Out, o.Force)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			st.Abort()
		}
	}()
	res := &SynthResult{Dir: o.Out, Tensors: len(tensors), Shards: len(shards)}
	var total int64
	for _, t := range tensors {
		total += 2 * elements(t.Shape)
	}
	prog := &lockedProgress{p: ProgressOrNop(o.Progress)}
	prog.Start("synthesize", total)
	// Shards are written concurrently (each tensor's stream is seeded by its
	// name, so the bytes do not depend on the order).
	weightMap := map[string]string{}
	sizes := make([]int64, len(shards))
	errs := make([]error, len(shards))
	next := make(chan int, len(shards))
	for i, shard := range shards {
		next <- i
		for _, t := range shard {
			weightMap[t.Name] = synthShardName(i, len(shards))
		}
	}
	close(next)
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range min(len(shards), goruntime.GOMAXPROCS(0)) {
		wg.Go(func() {
			gen := newHeavyTail(o.Seed)
			for i := range next {
				if sizes[i], errs[i] = writeSynthShard(sctx, st.Path(synthShardName(i, len(shards))), shards[i], gen, prog); errs[i] != nil {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	cancel()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range shards {
		if errs[i] != nil {
			return nil, errs[i]
		}
		res.Bytes += sizes[i]
	}
	prog.Finish()
	index, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": res.Bytes}, "weight_map": weightMap}, "", "  ")
	files := map[string][]byte{
		"config.json":                  cfgJSON,
		"generation_config.json":       []byte(synthGenerationConfig),
		"model.safetensors.index.json": index,
	}
	for name, data := range files {
		if err := st.WriteFile(name, data); err != nil {
			return nil, err
		}
	}
	if err := st.Publish(); err != nil {
		return nil, err
	}
	ok = true
	return res, nil
}

func synthShardName(i, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
}

func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// shardTensors groups tensors in order into shards of at most limit bytes
// (a tensor larger than the limit gets a shard of its own).
func shardTensors(tensors []layout.Tensor, limit int64) [][]layout.Tensor {
	var shards [][]layout.Tensor
	var cur []layout.Tensor
	var size int64
	for _, t := range tensors {
		b := 2 * elements(t.Shape)
		if len(cur) > 0 && size+b > limit {
			shards = append(shards, cur)
			cur, size = nil, 0
		}
		cur = append(cur, t)
		size += b
	}
	if len(cur) > 0 {
		shards = append(shards, cur)
	}
	return shards
}

// writeSynthShard streams one safetensors file: header, then each tensor's
// values generated in chunks.
func writeSynthShard(ctx context.Context, path string, tensors []layout.Tensor, gen *heavyTail, prog Progress) (int64, error) {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, t := range tensors {
		n := 2 * elements(t.Shape)
		header[t.Name] = map[string]any{"dtype": "BF16", "shape": t.Shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return 0, fmt.Errorf("dgq: synth header: %w", err)
	}
	if pad := (8 - len(h)%8) % 8; pad > 0 {
		h = append(h, strings.Repeat(" ", pad)...)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("dgq: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(h)))
	w.Write(prefix[:])
	w.Write(h)
	buf := make([]byte, 4<<20)
	for _, t := range tensors {
		gen.reset(t.Name)
		for left := 2 * elements(t.Shape); left > 0; {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			chunk := buf[:min(int64(len(buf)), left)]
			gen.fill(chunk)
			if _, err := w.Write(chunk); err != nil {
				return 0, fmt.Errorf("dgq: write %s: %w", path, err)
			}
			left -= int64(len(chunk))
			prog.Add(int64(len(chunk)))
		}
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("dgq: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("dgq: sync %s: %w", path, err)
	}
	return off, f.Close()
}

// heavyTail draws bf16 values from a 4096-entry table of Student-t(3)
// samples scaled to std 0.02; each tensor's stream is seeded by its name, so
// the output does not depend on sharding.
type heavyTail struct {
	seed  uint64
	table [4096]uint16
	state uint64
}

func newHeavyTail(seed uint64) *heavyTail {
	g := &heavyTail{seed: seed}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	// Student-t(3) has variance 3; scale its samples to std 0.02.
	scale := 0.02 / math.Sqrt(3)
	for i := range g.table {
		z := r.NormFloat64()
		chi := 0.0
		for k := 0; k < 3; k++ {
			n := r.NormFloat64()
			chi += n * n
		}
		v := float32(scale * z / math.Sqrt(chi/3))
		g.table[i] = uint16(math.Float32bits(v) >> 16)
	}
	return g
}

func (g *heavyTail) reset(name string) {
	h := fnv.New64a()
	h.Write([]byte(name))
	g.state = h.Sum64() ^ g.seed | 1
}

// fill writes little-endian bf16 values into b (len(b) even): xorshift64*
// gives four 12-bit table indices per step... five, from 60 of its bits.
func (g *heavyTail) fill(b []byte) {
	s := g.state
	for i := 0; i+10 <= len(b); i += 10 {
		s ^= s >> 12
		s ^= s << 25
		s ^= s >> 27
		r := s * 0x2545F4914F6CDD1D
		for k := 0; k < 5; k++ {
			binary.LittleEndian.PutUint16(b[i+2*k:], g.table[(r>>(12*k))&4095])
		}
	}
	for i := len(b) / 10 * 10; i+2 <= len(b); i += 2 {
		s ^= s >> 12
		s ^= s << 25
		s ^= s >> 27
		binary.LittleEndian.PutUint16(b[i:], g.table[(s*0x2545F4914F6CDD1D)>>52])
	}
	g.state = s
}

// SynthConfig is the published 26B-A4B config.json with num_hidden_layers
// and layer_types cut to n layers (every sixth layer full, the last one full):
// what dgq synth writes, and what real-shape tests plan with.
func SynthConfig(n int) []byte {
	types := make([]string, n)
	for i := range types {
		types[i] = layout.SlidingAttention
		if i%6 == 5 || i == n-1 {
			types[i] = layout.FullAttention
		}
	}
	cfg := map[string]any{
		"architectures": []string{"DiffusionGemmaForBlockDiffusion"}, "model_type": "diffusion_gemma",
		"canvas_length": 256, "tie_word_embeddings": true, "dtype": "bfloat16",
		"text_config": map[string]any{
			"model_type": "diffusion_gemma_text", "hidden_size": 2816, "num_hidden_layers": n, "vocab_size": 262144,
			"num_attention_heads": 16, "head_dim": 256, "num_key_value_heads": 8, "global_head_dim": 512,
			"num_global_key_value_heads": 2, "intermediate_size": 2112, "num_experts": 128, "top_k_experts": 8,
			"moe_intermediate_size": 704, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
			"final_logit_softcapping": 30.0, "sliding_window": 1024, "use_bidirectional_attention": "vision",
			"layer_types": types, "max_position_embeddings": 262144, "tie_word_embeddings": true,
			"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1,
			"rope_parameters": map[string]any{
				"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
				"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
			},
		},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return b
}

const synthGenerationConfig = `{
  "max_new_tokens": 256, "max_denoising_steps": 48,
  "sampler_config": {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 0.1},
  "t_min": 0.4, "t_max": 0.8, "stability_threshold": 1, "confidence_threshold": 0.005,
  "bos_token_id": 2, "pad_token_id": 0, "eos_token_id": [1, 106, 50]
}
`
