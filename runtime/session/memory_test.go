package session

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/generate"
)

// realSpec is the released model's shape (dgq synth's config, 30 layers)
// with every tensor stored in bf16.
func realSpec(t *testing.T) *Spec {
	t.Helper()
	cfg, err := layout.ParseConfig(dgq.SynthConfig(30))
	if err != nil {
		t.Fatal(err)
	}
	m := &dgq.Manifest{}
	for _, tn := range layout.ExpectedText(cfg) {
		n := int64(2)
		for _, d := range tn.Shape {
			n *= d
		}
		m.Tensors = append(m.Tensors, dgq.Tensor{Name: tn.Name, Shape: tn.Shape, Size: n})
	}
	return &Spec{Manifest: m, Config: cfg, GenConfig: generate.DefaultConfig()}
}

// tinyPack quantizes the embedded tiny checkpoint into a q4 pack.
func tinyPack(t *testing.T) string {
	t.Helper()
	src, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "q4")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: out, Profile: "q4"}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEstimateParts: each part of the estimate follows its documented
// formula: the KV cache at the capacity model.Cache grows to (doubling from
// 256 positions), logits 3 × canvas × vocab × 4 bytes, verify's source
// doubling the per-model parts and adding the parameters at 2 bytes.
func TestEstimateParts(t *testing.T) {
	s := realSpec(t)
	tc := &s.Config.Text
	var width, stored, params int64
	for _, l := range tc.Layers {
		width += int64(l.KVHeads * l.HeadDim)
	}
	for _, tn := range s.Manifest.Tensors {
		stored += tn.Size
		params += tn.Size / 2
	}
	C, V := int64(s.Config.CanvasLength), int64(tc.VocabSize)
	for _, c := range []struct {
		name     string
		w        Workload
		capacity int64
	}{
		{"short prompt", Workload{Prefill: 10, Canvas: 256, Positions: 266}, 512},
		{"bench default", Workload{Prefill: 1024, Canvas: 256, Positions: 1280}, 2048},
		{"max positions", Workload{Prefill: 131072 - 256, Canvas: 256, Positions: 131072}, 2 * (131072 - 256)},
		{"generation", Workload{Prefill: 100, Canvas: 256, Step: 256, Positions: 100 + 4*256}, 2048},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := s.Estimate(c.w, "cpu")
			if want := 2 * c.capacity * width * 4; e.KVCache != want {
				t.Errorf("KV cache %d, want %d (capacity %d)", e.KVCache, want, c.capacity)
			}
			if e.Weights != stored || e.Logits != 3*C*V*4 {
				t.Errorf("weights %d (want %d), logits %d (want %d)", e.Weights, stored, e.Logits, 3*C*V*4)
			}
			if e.Total != e.Weights+e.KVCache+e.Activations+e.Logits+e.Host {
				t.Errorf("total %d is not the sum of the parts", e.Total)
			}
			src := c.w
			src.Source = true
			d := s.Estimate(src, "cpu")
			if d.Weights != stored+2*params || d.KVCache != 2*e.KVCache || d.Activations != 2*e.Activations || d.Logits != 2*e.Logits {
				t.Errorf("with the source: %+v, alone %+v", d, e)
			}
			t.Logf("%s: total %s: weights %s, KV cache %s, activations %s, logits %s", c.name, limits.FormatBytes(e.Total),
				limits.FormatBytes(e.Weights), limits.FormatBytes(e.KVCache), limits.FormatBytes(e.Activations), limits.FormatBytes(e.Logits))
		})
	}
	// Activations grow with the longest forward; a GPU backend's MoE
	// scratch is smaller than the cpu backend's.
	a := s.Estimate(Workload{Prefill: 1024, Canvas: 256, Positions: 1280}, "cpu")
	b := s.Estimate(Workload{Prefill: 2048, Canvas: 256, Positions: 2304}, "cpu")
	g := s.Estimate(Workload{Prefill: 2048, Canvas: 256, Positions: 2304}, "cuda")
	if b.Activations != 2*a.Activations || !(g.Activations < b.Activations) {
		t.Errorf("activations: 1024 tokens %d, 2048 %d, on a GPU %d", a.Activations, b.Activations, g.Activations)
	}
}

// TestEstimateCheck: an estimate over the limit is refused in one line with
// its numbers (ErrMemory, class usage); --max-memory replaces what the
// backend has; an unknown memory refuses nothing.
func TestEstimateCheck(t *testing.T) {
	e := realSpec(t).Estimate(Workload{Prefill: 131072 - 256, Canvas: 256, Positions: 131072}, "cpu")
	e.Available, e.Where = 16e9, "host memory available (MemAvailable)"
	err := e.check(0)
	if !errors.Is(err, ErrMemory) || errclass.Of(err) != errclass.Usage || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err %v (class %v)", err, errclass.Of(err))
	}
	for _, want := range []string{"the run needs an estimated", "weights", "KV cache", "activations", "logits", "16.0 GB of host memory available (MemAvailable)", "--max-memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := e.check(e.Total); err != nil {
		t.Errorf("within --max-memory: %v", err)
	}
	if err := e.check(e.Total - 1); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "of --max-memory") {
		t.Errorf("beyond --max-memory: %v", err)
	}
	e.Available = 0
	if err := e.check(0); err != nil {
		t.Errorf("unknown memory: %v", err)
	}
}

// TestLoadRefusesMemory: Load refuses a workload beyond MaxMemory before
// the pack is opened (nothing of the blob read: the allocation is the
// manifest's and the config's), and records the estimate when it loads.
func TestLoadRefusesMemory(t *testing.T) {
	pack := tinyPack(t)
	w := &Workload{Prefill: 8, Canvas: 16, Positions: 24}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load(context.Background(), pack, Options{Workload: w, MaxMemory: 1000})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMemory) {
		t.Fatalf("err %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
		t.Errorf("the refusal allocated %d bytes", alloc)
	}
	s, err := Load(context.Background(), pack, Options{Workload: w, MaxMemory: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Memory == nil || s.Memory.Total <= 0 || s.Memory.Weights <= 0 {
		t.Errorf("memory estimate %+v", s.Memory)
	}
	for _, o := range []Options{{Workers: -1}, {Workers: limits.MaxWorkerCap + 1}, {MaxMemory: -1}} {
		if _, err := Load(context.Background(), pack, o); !errors.Is(err, limits.ErrRange) || errclass.Of(err) != errclass.Usage {
			t.Errorf("%+v: err %v", o, err)
		}
	}
}

// TestRunChecks: a run's lengths are refused before loading, naming the
// flag, against the model's positions.
func TestRunChecks(t *testing.T) {
	spec, err := ReadSpec(tinyPack(t))
	if err != nil {
		t.Fatal(err)
	}
	if spec.MaxPositions() != 4096 || spec.Config.CanvasLength != 16 {
		t.Fatalf("tiny: %d positions, canvas %d", spec.MaxPositions(), spec.Config.CanvasLength)
	}
	for _, c := range []struct {
		name    string
		g       generate.Options
		mention string
	}{
		{"negative new tokens", generate.Options{MaxNewTokens: -5}, "--max-new-tokens -5 is negative"},
		{"too many new tokens", generate.Options{MaxNewTokens: 1 << 20}, "--max-new-tokens 1048576 exceeds the model's maximum of 4096 positions"},
		{"a block too many", generate.Options{MaxNewTokens: 4081}, "--max-new-tokens 4081 exceeds the model's maximum of 4096 positions after a one-token prompt"},
		{"negative steps", generate.Options{MaxSteps: -1}, "--max-steps -1 is negative"},
		{"too many steps", generate.Options{MaxSteps: generate.MaxGenSteps + 1}, "--max-steps 4097 exceeds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := RunOptions{Prompt: "hi", Generation: c.g}.check(spec)
			if !errors.Is(err, limits.ErrRange) || errclass.Of(err) != errclass.Usage || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err %v, want one naming %q", err, c.mention)
			}
		})
	}
	w, err := RunOptions{Prompt: "hi", Generation: generate.Options{MaxNewTokens: 40}}.check(spec)
	if err != nil || w.Canvas != 16 || w.Positions != w.Prefill+48 {
		t.Errorf("workload %+v, %v", w, err)
	}
	if err := (RunOptions{Generation: generate.Options{MaxNewTokens: 4080}}).checkPrompt(spec, 17); !errors.Is(err, limits.ErrRange) ||
		!strings.Contains(err.Error(), "after the prompt's 17 tokens") {
		t.Errorf("prompt of 17 tokens: %v", err)
	}
	if err := (RunOptions{Generation: generate.Options{MaxNewTokens: 4080}}).checkPrompt(spec, 16); err != nil {
		t.Errorf("prompt of 16 tokens: %v", err)
	}
}

// TestHostMemory: on Linux the total and available memory are read.
func TestHostMemory(t *testing.T) {
	total, avail := HostMemory()
	if runtime.GOOS == "linux" && (total == 0 || avail == 0 || avail > total) {
		t.Errorf("total %d, available %d", total, avail)
	}
}
