package model

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
	"github.com/nlpodyssey/safetensors"
)

// TestWriteDequantized writes, for each of dequantKinds, a Hugging Face
// snapshot whose weights are the pack's decoded weights (quantized tensors
// as float32, raw ones verbatim) next to the fixture's reference, for
// testdata/hf_dequant.py. Run it with DGQ_DEQUANT_OUT=DIR.
func TestWriteDequantized(t *testing.T) {
	out := os.Getenv("DGQ_DEQUANT_OUT")
	if out == "" {
		t.Skip("set DGQ_DEQUANT_OUT=DIR to write dequantized snapshots")
	}
	for _, k := range fixture.Dequantized {
		dir := filepath.Join(out, k.Fixture+"-"+k.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		w := PackWeights(fixture.OpenPack(t, k.Fixture, k.Profile, k.Sets...))
		tensors := map[string]testmodel.View{}
		for _, td := range w.Tensors() {
			shape := make([]uint64, len(td.Shape))
			for i, d := range td.Shape {
				shape[i] = uint64(d)
			}
			if td.Format == codecs.Raw {
				tensors[td.Name] = testmodel.View{DT: td.DType, Dims: shape, Bytes: td.Bytes}
				continue
			}
			f, err := vector(td) // the whole tensor, decoded as the backends decode it
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 4*len(f))
			for i, v := range f {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			tensors[td.Name] = testmodel.View{DT: codecs.F32, Dims: shape, Bytes: b}
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
		m, err := Bind(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"reference.json", "reference.safetensors"} {
			b, err := os.ReadFile(filepath.Join(fixture.RefDir(t, k.Fixture), n))
			if err != nil {
				t.Fatal(err)
			}
			if n == "reference.json" { // the weights the reference will be made from (check.Parity's verdict)
				var meta map[string]any
				if err := json.Unmarshal(b, &meta); err != nil {
					t.Fatal(err)
				}
				meta["weights_blake3"] = m.WeightsDigest()
				if b, err = json.MarshalIndent(meta, "", "  "); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "fixture_"+n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
