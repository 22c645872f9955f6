package enginepack

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// testTensor is a tensor for a synthetic safetensors file.
type testTensor struct {
	name  string
	dtype string
	shape []int64
	data  []byte
}

// bf16Tensor makes a BF16 tensor of deterministic, varied values
// (truncated from float32, so some rows hold negative values and zeros).
func bf16Tensor(name string, seed int, shape ...int64) testTensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	data := make([]byte, 2*n)
	for i := range n {
		v := float32(math.Sin(float64(i)*0.37+float64(seed))) * 0.05
		if i%29 == 0 {
			v *= 8 // an outlier now and then
		}
		binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
	}
	return testTensor{name: name, dtype: "BF16", shape: shape, data: data}
}

// f32Tensor makes an F32 tensor.
func f32Tensor(name string, vals ...float32) testTensor {
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return testTensor{name: name, dtype: "F32", shape: []int64{int64(len(vals))}, data: data}
}

// writeSafetensors writes a safetensors file: header keys in the order
// given, data back to back in that order, plus a __metadata__ entry.
func writeSafetensors(t *testing.T, path string, tensors []testTensor) {
	t.Helper()
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, tt := range tensors {
		header[tt.name] = map[string]any{
			"dtype": tt.dtype, "shape": tt.shape,
			"data_offsets": []int{len(data), len(data) + len(tt.data)},
		}
		data = append(data, tt.data...)
	}
	hj, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hj)))
	out = append(append(out, hj...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSnapshot writes shards (file name → tensors), an index naming every
// tensor's shard, and two side files.
func writeSnapshot(t *testing.T, dir string, shards map[string][]testTensor) {
	t.Helper()
	wm := map[string]string{}
	for file, ts := range shards {
		writeSafetensors(t, filepath.Join(dir, file), ts)
		for _, tt := range ts {
			wm[tt.name] = file
		}
	}
	idx, err := json.Marshal(map[string]any{"metadata": map[string]int{"total_size": 0}, "weight_map": wm})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, IndexFile), idx)
	mustWrite(t, filepath.Join(dir, "config.json"), []byte(`{"model_type":"test"}`))
	mustWrite(t, filepath.Join(dir, "tokenizer.json"), []byte(`{"tok":1}`))
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
