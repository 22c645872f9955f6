package hfcache

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
)

// FuzzParseHeader: ParseHeader never panics; what it accepts lies inside
// the file and tiles the data section exactly, and the reference reader
// agrees; what it rejects is reported as one line wrapping ErrSafetensors.
func FuzzParseHeader(f *testing.F) {
	// Seeds from the tiny shards' headers, kept small (whole shards make
	// the fuzzer crawl): the real header with no data (rejected late, after
	// the whole JSON is walked), and the same tensors re-laid with every
	// dimension cut to at most 2 (accepted).
	shards, _ := filepath.Glob(filepath.Join(tinyFlat, "*.safetensors"))
	for _, p := range shards {
		file, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		h, err := ParseHeader(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(file[:8+h.Len])
		entries := []string{`"__metadata__":{"format":"pt"}`}
		var off int64
		for _, ti := range h.Tensors {
			shape := make([]int64, len(ti.Shape))
			for i, d := range ti.Shape {
				shape[i] = min(d, 2)
			}
			size, _ := byteSize(shape, ti.DType)
			entries = append(entries, ent(ti.Name, ti.DType.String(), fmtShapeJSON(shape), off, off+size))
			off += size
		}
		doc := hdr(entries...)
		doc += strings.Repeat(" ", (8-len(doc)%8)%8)
		f.Add(stFile(doc, seq(int(off))))
	}
	for _, tc := range headerCases() {
		f.Add(tc.file)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := ParseHeader(file)
		if err != nil {
			msg := err.Error()
			if !errors.Is(err, ErrSafetensors) || !strings.HasPrefix(msg, "hfcache: ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("bad error %q", msg)
			}
			if h != nil {
				t.Fatal("header with error")
			}
			return
		}
		checkInvariants(t, file, h)
		if _, _, err := safetensors.ReadMetadata(file); err != nil {
			t.Fatalf("accepted but the reference reader says %v", err)
		}
		if _, err := HeaderDigest(file); err != nil {
			t.Fatalf("accepted but HeaderDigest says %v", err)
		}
	})
}

// FuzzParseIndex: ParseIndex never panics; what it accepts agrees with
// encoding/json and names only safe relative shard paths.
func FuzzParseIndex(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join(tinyFlat, IndexFile)); err == nil {
		f.Add(data)
	}
	for _, tc := range indexCases() {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseIndex(data)
		if err != nil {
			msg := err.Error()
			if !errors.Is(err, ErrIndex) || !strings.HasPrefix(msg, "hfcache: ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		if len(idx.WeightMap) == 0 || idx.TotalSize < 0 {
			t.Fatalf("accepted %+v", idx)
		}
		for name, shard := range idx.WeightMap {
			if name == "" || checkRelPath(shard) != nil || strings.Contains(shard, "..") && strings.Contains("/"+shard+"/", "/../") {
				t.Fatalf("accepted tensor %q in shard %q", name, shard)
			}
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("accepted but encoding/json says %v", err)
		}
		var wm map[string]string
		if err := json.Unmarshal(top["weight_map"], &wm); err != nil || !maps.Equal(wm, idx.WeightMap) {
			t.Fatalf("weight_map differs from encoding/json's (%v)", err)
		}
	})
}

func fmtShapeJSON(shape []int64) string {
	b, _ := json.Marshal(shape)
	if string(b) == "null" {
		return "[]"
	}
	return string(b)
}
