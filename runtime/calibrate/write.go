package calibrate

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// writeImatrix writes the stats as safetensors (docs/format.md, "The
// imatrix file"): NAME.in_sum2 F32 [in] or [experts, in], NAME.counts F32
// [1] or [experts], in name order (the header's keys sorted, the data in
// the same order), through a temporary file renamed over out.
func writeImatrix(out string, stats []*stat, meta map[string]string) error {
	type entry struct {
		DType   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	header := map[string]any{"__metadata__": meta}
	var data []byte
	put := func(name string, shape []int, vals []float64) {
		start := int64(len(data))
		for _, v := range vals {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
		}
		header[name] = entry{DType: "F32", Shape: shape, Offsets: [2]int64{start, int64(len(data))}}
	}
	for _, s := range stats { // by tensor name, each tensor's counts then in_sum2
		if s.experts == 1 {
			put(s.name+".counts", []int{1}, s.counts)
			put(s.name+".in_sum2", []int{s.in}, s.sum2)
		} else {
			put(s.name+".counts", []int{s.experts}, s.counts)
			put(s.name+".in_sum2", []int{s.experts, s.in}, s.sum2)
		}
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".imatrix-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("calibrate: writing %s: %w", out, err)
	}
	if _, err := f.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(h)))); err != nil {
		return fail(err)
	}
	if _, err := f.Write(h); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
