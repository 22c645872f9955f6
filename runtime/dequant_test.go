package runtime

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/nlpodyssey/safetensors"
)

// stView adapts tensor bytes to the safetensors library's View.
type stView struct {
	dtype safetensors.DType
	shape []uint64
	data  []byte
}

func (v stView) DType() safetensors.DType { return v.dtype }
func (v stView) Shape() []uint64          { return v.shape }
func (v stView) Data() []byte             { return v.data }
func (v stView) DataLen() uint64          { return uint64(len(v.data)) }

// dequantKinds are the quantized packs whose dequantized weights
// testdata/hf_dequant.py runs through transformers.
var dequantKinds = []struct {
	fixture, name, profile string
	sets                   []string
}{
	{"tiny", "q8", "q4", []string{"experts=q8"}},
	{"tiny", "q4", "q4", nil},
	{"tiny", "nvfp4", "nvfp4", nil},
	{"wide", "q4", "q4", nil},
}

// TestWriteDequantized writes, for each of dequantKinds, a Hugging Face
// snapshot whose weights are the pack's decoded weights (quantized tensors
// as float32, raw ones verbatim) next to the fixture's reference, for
// testdata/hf_dequant.py. Run it with DGQ_DEQUANT_OUT=DIR.
func TestWriteDequantized(t *testing.T) {
	out := os.Getenv("DGQ_DEQUANT_OUT")
	if out == "" {
		t.Skip("set DGQ_DEQUANT_OUT=DIR to write dequantized snapshots")
	}
	for _, k := range dequantKinds {
		dir := filepath.Join(out, k.fixture+"-"+k.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		w := openPackSets(t, k.fixture, k.profile, k.sets...)
		tensors := map[string]stView{}
		for _, td := range w.Tensors() {
			shape := make([]uint64, len(td.Shape))
			for i, d := range td.Shape {
				shape[i] = uint64(d)
			}
			if td.Format == codecs.Raw {
				tensors[td.Name] = stView{dtype: stDTypeOf(td.DType), shape: shape, data: td.Bytes}
				continue
			}
			mx, err := newMatrix(td)
			if err != nil {
				t.Fatal(err)
			}
			f := make([]float32, mx.geom.Elements())
			mx.decode(0, mx.rows(), f)
			b := make([]byte, 4*len(f))
			for i, v := range f {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			tensors[td.Name] = stView{dtype: safetensors.F32, shape: shape, data: b}
		}
		fh, err := os.Create(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if err := safetensors.SerializeToWriter(tensors, map[string]string{"format": "pt"}, fh); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"config.json", "generation_config.json"} {
			b, err := w.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []string{"reference.json", "reference.safetensors"} {
			b, err := os.ReadFile(filepath.Join(refDir(t, k.fixture), n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "fixture_"+n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func stDTypeOf(d codecs.DType) safetensors.DType {
	switch d {
	case codecs.F16:
		return safetensors.F16
	case codecs.F32:
		return safetensors.F32
	}
	return safetensors.BF16
}
