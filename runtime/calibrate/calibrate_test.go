package calibrate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// calText writes a calibration text of about 60 tokens per repetition.
func calText(t *testing.T, reps int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cal.txt")
	para := "The sea was calm that morning, and the fishing boats went out early past the harbour wall. "
	if err := os.WriteFile(p, []byte(strings.Repeat(para, reps)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type stTensor struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// readST parses a safetensors file: its metadata and tensors as float32.
func readST(t *testing.T, path string) (map[string]string, map[string]stTensor, map[string][]float32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	hdr := map[string]stTensor{}
	vals := map[string][]float32{}
	data := b[8+n:]
	var total int64
	for k, v := range raw {
		if k == "__metadata__" {
			json.Unmarshal(v, &meta)
			continue
		}
		var e stTensor
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		hdr[k] = e
		seg := data[e.Offsets[0]:e.Offsets[1]]
		f := make([]float32, len(seg)/4)
		for i := range f {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(seg[4*i:]))
		}
		vals[k] = f
		total += e.Offsets[1] - e.Offsets[0]
	}
	if total != int64(len(data)) {
		t.Errorf("the tensors cover %d of the %d data bytes", total, len(data))
	}
	return meta, hdr, vals
}

func run(t *testing.T, o Options) *Result {
	t.Helper()
	o.Load.Workers = 2
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The file holds NAME.in_sum2 and NAME.counts of every quantizable tensor
// with the contract's dtypes and shapes; dense counts are the positions,
// each layer's expert counts sum to positions × top-k; sums of squares are
// finite and ≥ 0; the same inputs give the same bytes.
func TestCalibrateFile(t *testing.T) {
	pack := fixture.PackDir(t, "tiny", "bf16")
	text := calText(t, 12)
	out := filepath.Join(t.TempDir(), "tiny.imatrix.safetensors")
	o := Options{Source: pack, Text: text, Out: out, Windows: 3, PromptLen: 8, Seed: 5}
	r := run(t, o)
	t.Logf("%+v", *r)
	if r.Windows < 2 || r.Positions != r.Windows*(8+2*len(NoiseRates)*16) {
		t.Errorf("windows %d positions %d", r.Windows, r.Positions)
	}
	meta, hdr, vals := readST(t, out)
	for _, k := range []string{"dgq_version", "text_sha256", "windows", "positions", "prompt_len", "noise_rates", "seed"} {
		if meta[k] == "" {
			t.Errorf("metadata lacks %s", k)
		}
	}
	m, err := dgq.ReadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	topK := 2
	tensors := 0
	for _, mt := range m.Tensors {
		c, _, _ := layout.Classify(mt.Name, len(mt.Shape))
		if c.Locked() || len(mt.Shape) < 2 {
			if _, ok := hdr[mt.Name+".in_sum2"]; ok {
				t.Errorf("%s (%s) is recorded", mt.Name, c)
			}
			continue
		}
		tensors++
		s, c2 := hdr[mt.Name+".in_sum2"], hdr[mt.Name+".counts"]
		if s.DType != "F32" || c2.DType != "F32" {
			t.Errorf("%s: dtypes %s %s", mt.Name, s.DType, c2.DType)
			continue
		}
		counts := vals[mt.Name+".counts"]
		for _, v := range vals[mt.Name+".in_sum2"] {
			if !(v >= 0) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: in_sum2 holds %g", mt.Name, v)
			}
		}
		if len(mt.Shape) == 3 {
			E, in := int(mt.Shape[0]), int(mt.Shape[2])
			if !equalInts(s.Shape, []int{E, in}) || !equalInts(c2.Shape, []int{E}) {
				t.Errorf("%s %v: shapes %v %v", mt.Name, mt.Shape, s.Shape, c2.Shape)
			}
			var sum float64
			for _, v := range counts {
				sum += float64(v)
			}
			if int(sum) != r.Positions*topK {
				t.Errorf("%s: expert counts sum to %g, want %d × %d", mt.Name, sum, r.Positions, topK)
			}
		} else {
			if !equalInts(s.Shape, []int{int(mt.Shape[1])}) || !equalInts(c2.Shape, []int{1}) {
				t.Errorf("%s %v: shapes %v %v", mt.Name, mt.Shape, s.Shape, c2.Shape)
			}
			want := r.Positions
			if c == layout.SC {
				want = r.Windows * len(NoiseRates) * 16 // the canvases denoised with self-conditioning
			}
			if c == layout.Vision {
				want = 0
			}
			if int(counts[0]) != want {
				t.Errorf("%s (%s): counts %g, want %d", mt.Name, c, counts[0], want)
			}
		}
	}
	if tensors == 0 || r.Tensors != tensors || len(hdr) != 2*tensors {
		t.Errorf("%d quantizable tensors, result %d, file %d entries", tensors, r.Tensors, len(hdr))
	}
	if len(r.Coverage) == 0 {
		t.Error("no coverage")
	}
	// Deterministic.
	first, _ := os.ReadFile(out)
	o.Force = true
	run(t, o)
	if second, _ := os.ReadFile(out); !bytes.Equal(first, second) {
		t.Error("the same inputs gave other bytes")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The refusals: a text shorter than one window, a quantized source, an
// existing OUT without --force, options out of range; each a usage error
// that writes nothing.
func TestCalibrateErrors(t *testing.T) {
	bf16 := fixture.PackDir(t, "tiny", "bf16")
	text := calText(t, 12)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.imatrix.safetensors")
	exists := filepath.Join(dir, "exists.imatrix.safetensors")
	os.WriteFile(exists, []byte("old"), 0o644)
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"short text", Options{Source: bf16, Text: calText(t, 1), Out: out, Windows: 1, PromptLen: 128}, "one window needs 143"},
		{"quantized", Options{Source: fixture.PackDir(t, "tiny", "q4"), Text: text, Out: out, Windows: 1, PromptLen: 8}, "calibrate measures the bf16 model"},
		{"exists", Options{Source: bf16, Text: text, Out: exists, Windows: 1, PromptLen: 8}, "pass --force"},
		{"not safetensors", Options{Source: bf16, Text: text, Out: filepath.Join(dir, "x.bin"), Windows: 1, PromptLen: 8}, ".safetensors"},
		{"windows", Options{Source: bf16, Text: text, Out: out, Windows: MaxWindows + 1, PromptLen: 8}, "--windows"},
		{"no folder", Options{Source: bf16, Text: text, Out: filepath.Join(dir, "none", "x.imatrix.safetensors"), Windows: 1, PromptLen: 8}, "does not exist"},
		{"windows 0", Options{Source: bf16, Text: text, Out: out, PromptLen: 8}, "--windows"},
		{"prompt-len", Options{Source: bf16, Text: text, Out: out, Windows: 1, PromptLen: 5000}, "--prompt-len"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if errclass.Of(err) != errclass.Usage {
				t.Errorf("class %v of %v", errclass.Of(err), err)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was written", out)
			}
		})
	}
	if b, _ := os.ReadFile(exists); string(b) != "old" {
		t.Error("the existing file was overwritten")
	}
}

// A snapshot source is made into a temporary bf16 pack (removed at the
// end) and gives the very bytes its bf16 pack gives.
func TestCalibrateSnapshotSource(t *testing.T) {
	text := calText(t, 12)
	dir := t.TempDir()
	tmp := t.TempDir()
	a, b := filepath.Join(dir, "a.imatrix.safetensors"), filepath.Join(dir, "b.imatrix.safetensors")
	o := Options{Text: text, Windows: 2, PromptLen: 8, Seed: 1, Tmp: tmp}
	o.Source, o.Out = fixture.PackDir(t, "tiny", "bf16"), a
	run(t, o)
	o.Source, o.Out = fixture.SnapshotDir(t, "tiny"), b
	r := run(t, o)
	if r.SourceKind != "snapshot_copy" {
		t.Errorf("source kind %s", r.SourceKind)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if !bytes.Equal(x, y) {
		t.Error("the snapshot and its bf16 pack gave other bytes")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the temporary pack was left in %s: %v", tmp, left)
	}
}
