package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
)

// ErrMemory: the estimate of what a run will allocate exceeds what the
// backend has (or --max-memory). Class usage (exit 2): ask for less, or
// raise --max-memory.
var ErrMemory = errclass.New(errclass.Usage, "not enough memory")

// Spec is what a pack says of its model before any weight is read: the
// manifest (every tensor's shape and stored size), config.json (positions,
// canvas, vocabulary, the layers' geometry) and generation_config.json
// (DefaultConfig when absent). Bounds and the memory estimate are checked
// against it before Load.
type Spec struct {
	Dir       string // the pack folder (ORG/NAME resolved)
	Manifest  *dgq.Manifest
	Config    *layout.Config
	GenConfig *generate.Config
}

// maxSideFile bounds config.json and generation_config.json as ReadSpec
// reads them.
const maxSideFile = 16 << 20

// ReadSpec reads the manifest and the config side files of the pack at dir
// (a folder or ORG/NAME[@REV] in the hub cache), and nothing of the blob.
func ReadSpec(dir string) (*Spec, error) {
	dir, err := dgq.ResolvePack(dir)
	if err != nil {
		return nil, err
	}
	m, err := dgq.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	s := &Spec{Dir: dir, Manifest: m, GenConfig: generate.DefaultConfig()}
	raw, err := readSide(dir, "config.json")
	if err != nil {
		return nil, fmt.Errorf("%w: %s: config.json: %v", model.ErrBinding, dir, err)
	}
	if s.Config, err = layout.ParseConfig(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	switch raw, err := readSide(dir, "generation_config.json"); {
	case err == nil:
		if s.GenConfig, err = generate.ParseConfig(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	return s, nil
}

// readSide reads a side file of the pack, at most maxSideFile bytes.
func readSide(dir, name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSideFile+1))
	if err == nil && len(b) > maxSideFile {
		err = fmt.Errorf("%s is larger than %d bytes", name, maxSideFile)
	}
	return b, err
}

// MaxPositions is the most positions a sequence of the model may hold:
// config.json's max_position_embeddings (sliding layers attend to a window
// of them, full-attention layers to all).
func (s *Spec) MaxPositions() int { return s.Config.Text.MaxPositionEmbeddings }

// CheckPositions refuses a sequence of n positions beyond MaxPositions.
// option and value are what the user gave; detail (may be empty) says what
// besides value makes up n ("with a canvas of 16").
func (s *Spec) CheckPositions(option string, value, n int, detail string) error {
	maxPos := s.MaxPositions()
	switch {
	case n <= maxPos:
		return nil
	case value > maxPos || detail == "":
		return limits.Errorf(option, value, "exceeds the model's maximum of %d positions", maxPos)
	}
	return limits.Errorf(option, value, "exceeds the model's maximum of %d positions %s (%d positions)", maxPos, detail, n)
}

// CheckCanvas checks a canvas-length option whose 0 means the model's
// canvas_length: negative values and values above it are refused.
func (s *Spec) CheckCanvas(option string, v int) error {
	C := s.Config.CanvasLength
	return limits.First(nil,
		limits.NonNegative(option, v, fmt.Sprintf("0 is the model's canvas of %d positions", C)),
		limits.Max(option, v, C, fmt.Sprintf("the model's canvas of %d positions", C)))
}

// Blocks is the positions n new tokens take when generated in whole
// blocks of the model's canvas_length.
func (s *Spec) Blocks(n int) int {
	C := s.Config.CanvasLength
	return (n + C - 1) / C * C
}

// Workload is what a command will run on a loaded pack, for the memory
// estimate (Spec.Estimate).
type Workload struct {
	// Prefill is the tokens of the longest single prefill (a prompt, a
	// window's prefix).
	Prefill int
	// Canvas is the positions of each denoising forward.
	Canvas int
	// Positions is the most positions one KV cache holds: the prefill, the
	// committed blocks after it and the canvas being denoised.
	Positions int
	// Step is how many positions the cache grows by after the first
	// prefill (a generation's block); 0: at once to Positions.
	Step int
	// Source adds verify's bf16 source beside the pack: a second model
	// of the same config whose weights are the pack's parameters at 2
	// bytes each, with its own KV cache, activations and logits.
	Source bool
	// Host is what the command itself holds besides, in bytes (token ids
	// of verify's windows, a parity reference).
	Host int64
}

// MemoryEstimate is what a run allocates, by part, and what the backend
// has. Every part counts each model a run holds (verify: two).
type MemoryEstimate struct {
	// Weights: every tensor as the pack stores it (the manifest's byte_len,
	// which is also what a GPU backend re-lays them into; the cpu backend
	// reads them in place from the mapped pack, so they must stay in
	// memory to run), plus the bf16 source's parameters × 2 for verify.
	Weights int64 `json:"weights_bytes"`
	// KVCache: per layer keys and values of every position (sliding
	// layers keep all of them too) in float32, at the capacity the cache
	// grows to (it doubles, from 256 positions).
	KVCache int64 `json:"kv_cache_bytes"`
	// Activations: the engine's buffers for the longest forward (S tokens:
	// 6·S·H residual-sized, 2·S·heads·head_dim for queries and attention,
	// 2·S·kv width, 2·S·intermediate, the ids), in float32, plus the mixture
	// of experts' scratch: on the cpu backend per (token, top-k expert)
	// pair the input in float64, gate/up and down outputs in float32 and
	// the activation in float64 (K·(12·H + 16·F) bytes per token), on a GPU
	// backend gate/up, activation and down in float32.
	Activations int64 `json:"activations_bytes"`
	// Logits: canvas × vocabulary × 4 bytes, three times per model (the
	// backend's buffer, the host copy of a denoise's logits, the
	// self-conditioning logits).
	Logits int64 `json:"logits_bytes"`
	// Host is what the command holds besides (Workload.Host, and the
	// prefill's ids).
	Host int64 `json:"host_bytes"`
	// Total is the sum of the parts.
	Total int64 `json:"total_bytes"`
	// Available is the memory the run is checked against: the device's
	// memory for a GPU backend, the host's available memory (Linux
	// MemAvailable, else the physical memory) for the cpu backend; 0 when
	// it cannot be told (nothing is then refused).
	Available int64 `json:"available_bytes"`
	// Where says what Available is ("host memory available (MemAvailable)",
	// "device memory of NVIDIA H200").
	Where string `json:"available_of"`
}

// Estimate is the memory a run of w on this pack allocates on a backend
// named backendName ("cpu" or a GPU backend); Available is left 0 (Load
// fills it from the backend).
func (s *Spec) Estimate(w Workload, backendName string) MemoryEstimate {
	t := &s.Config.Text
	var e MemoryEstimate
	models := int64(1)
	for _, tn := range s.Manifest.Tensors {
		e.Weights += tn.Size
		if w.Source {
			n := int64(1)
			for _, d := range tn.Shape {
				n *= d
			}
			e.Weights += 2 * n
		}
	}
	if w.Source {
		models = 2
	}
	// KV cache: the capacity model.Cache grows to.
	capacity := 0
	reserve := func(rows int) {
		if rows > capacity {
			capacity = max(rows, 2*capacity, 256)
		}
	}
	reserve(w.Prefill)
	if w.Step > 0 {
		for r := w.Prefill + w.Canvas; r < w.Positions; r += w.Step {
			reserve(r)
		}
	}
	reserve(w.Positions)
	kvWidth, maxKV, maxHD := int64(0), int64(0), int64(t.HeadDim)
	for _, l := range t.Layers {
		kvWidth += int64(l.KVHeads * l.HeadDim)
		maxKV = max(maxKV, int64(l.KVHeads*l.HeadDim))
		maxHD = max(maxHD, int64(l.HeadDim))
	}
	e.KVCache = models * 2 * int64(capacity) * kvWidth * 4
	// Activations of the longest forward.
	S := int64(max(w.Prefill, w.Canvas, w.Step))
	H, I, K, F := int64(t.HiddenSize), int64(t.IntermediateSize), int64(t.TopK), int64(t.MoEIntermediateSize)
	act := S * (6*H + 2*int64(t.NumHeads)*maxHD + 2*maxKV + 2*I + 1) * 4
	if backendName == "" || backendName == "cpu" {
		act += S*K*(12*H+16*F+20) + S*(8*H+4*int64(t.NumExperts))
	} else {
		act += S * K * (3*F + H) * 4
	}
	e.Activations = models * act
	e.Logits = models * 3 * int64(w.Canvas) * int64(t.VocabSize) * 4
	e.Host = w.Host + 12*int64(w.Prefill)
	e.Total = e.Weights + e.KVCache + e.Activations + e.Logits + e.Host
	return e
}

// available fills Available and Where from the backend: the host's for the
// cpu backend, a GPU's memory as its Caps say (else through
// backend.DeviceDescriber).
func (e *MemoryEstimate) available(be backend.Backend) {
	if be.Name() == "cpu" {
		total, avail := HostMemory()
		switch {
		case avail > 0:
			e.Available, e.Where = int64(avail), "host memory available (MemAvailable)"
		case total > 0:
			e.Available, e.Where = int64(total), "host memory (physical)"
		}
		return
	}
	mem, name := be.Caps().Memory, be.Caps().Device
	if d, ok := be.(backend.DeviceDescriber); ok && mem == 0 {
		info := d.DeviceInfo()
		mem, name = info.Memory, info.Name
	}
	if mem > 0 {
		e.Available, e.Where = int64(min(mem, 1<<62)), "device memory of "+name
	}
}

// check refuses the estimate when its total exceeds maxMemory, or without
// one what the backend has.
func (e *MemoryEstimate) check(maxMemory int64) error {
	limit, where := e.Available, e.Where
	if maxMemory > 0 {
		limit, where = maxMemory, "--max-memory"
	}
	if limit <= 0 || e.Total <= limit {
		return nil
	}
	parts := []string{"weights " + limits.FormatBytes(e.Weights), "KV cache " + limits.FormatBytes(e.KVCache),
		"activations " + limits.FormatBytes(e.Activations), "logits " + limits.FormatBytes(e.Logits)}
	if e.Host > 1<<20 {
		parts = append(parts, "host "+limits.FormatBytes(e.Host))
	}
	return fmt.Errorf("%w: the run needs an estimated %s (%s), more than the %s of %s; ask for fewer positions, or pass --max-memory %dGB to try anyway",
		ErrMemory, limits.FormatBytes(e.Total), strings.Join(parts, ", "), limits.FormatBytes(limit), where, (e.Total+999_999_999)/1_000_000_000)
}
