package hfcache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func indexCases() []struct {
	name, data string
	ok         bool
	msg        string
} {
	return []struct {
		name, data string
		ok         bool
		msg        string
	}{
		{name: "good", data: `{"metadata":{"total_size":12,"total_parameters":3},"weight_map":{"a":"m1.safetensors","b":"m2.safetensors"}}`, ok: true},
		{name: "no metadata", data: `{"weight_map":{"a":"m.safetensors"}}`, ok: true},
		{name: "metadata null", data: `{"metadata":null,"weight_map":{"a":"m.safetensors"}}`, ok: true},
		{name: "total_size null", data: `{"metadata":{"total_size":null},"weight_map":{"a":"m.safetensors"}}`, ok: true},
		{name: "total_size float", data: `{"metadata":{"total_size":1.2e3},"weight_map":{"a":"m.safetensors"}}`, ok: true},
		{name: "sub-path", data: `{"weight_map":{"a":"sub/dir/m.safetensors"}}`, ok: true},
		{name: "extra keys", data: `{"format":{"x":[1,{"y":null}]},"weight_map":{"a":"m.safetensors"}}  `, ok: true},

		{name: "not JSON", data: `{"weight_map":`, msg: "not valid JSON"},
		{name: "not an object", data: `["weight_map"]`, msg: "the index is an array, not an object"},
		{name: "trailing data", data: `{"weight_map":{"a":"m.safetensors"}} {}`, msg: "unexpected data after the top-level object"},
		{name: "missing weight_map", data: `{"metadata":{"total_size":1}}`, msg: "no weight_map"},
		{name: "empty weight_map", data: `{"weight_map":{}}`, msg: "weight_map is empty"},
		{name: "weight_map not object", data: `{"weight_map":["a"]}`, msg: "weight_map: weight_map is an array, not an object"},
		{name: "shard not string", data: `{"weight_map":{"a":1}}`, msg: `tensor "a": shard is the number 1, not a string`},
		{name: "empty tensor name", data: `{"weight_map":{"":"m.safetensors"}}`, msg: "empty name"},
		{name: "duplicate tensor", data: `{"weight_map":{"a":"m1.safetensors","a":"m2.safetensors"}}`, msg: `tensor "a" appears twice`},
		{name: "duplicate weight_map", data: `{"weight_map":{"a":"m.safetensors"},"weight_map":{"b":"m.safetensors"}}`, msg: `key "weight_map" appears twice`},
		{name: "dotdot", data: `{"weight_map":{"a":"../m.safetensors"}}`, msg: `has a ".." path element`},
		{name: "inner dotdot", data: `{"weight_map":{"a":"sub/../../m.safetensors"}}`, msg: `".."`},
		{name: "dot", data: `{"weight_map":{"a":"./m.safetensors"}}`, msg: `has a "." path element`},
		{name: "absolute", data: `{"weight_map":{"a":"/etc/m.safetensors"}}`, msg: "is an absolute path"},
		{name: "backslash", data: `{"weight_map":{"a":"sub\\m.safetensors"}}`, msg: "contains a backslash"},
		{name: "empty element", data: `{"weight_map":{"a":"sub//m.safetensors"}}`, msg: "empty path element"},
		{name: "trailing slash", data: `{"weight_map":{"a":"sub/"}}`, msg: "empty path element"},
		{name: "empty shard", data: `{"weight_map":{"a":""}}`, msg: "is empty"},
		{name: "NUL", data: `{"weight_map":{"a":"m\u0000.safetensors"}}`, msg: "NUL"},
		{name: "negative total_size", data: `{"metadata":{"total_size":-1},"weight_map":{"a":"m.safetensors"}}`, msg: "total_size"},
		{name: "fractional total_size", data: `{"metadata":{"total_size":1.5},"weight_map":{"a":"m.safetensors"}}`, msg: "total_size"},
		{name: "string total_size", data: `{"metadata":{"total_size":"12"},"weight_map":{"a":"m.safetensors"}}`, msg: "total_size is the string"},
		{name: "metadata not object", data: `{"metadata":[],"weight_map":{"a":"m.safetensors"}}`, msg: "metadata: is an array"},
		{name: "invalid UTF-8", data: "{\"weight_map\":{\"a\xff\":\"m.safetensors\"}}", msg: "UTF-8"},
	}
}

func TestParseIndex(t *testing.T) {
	for _, tc := range indexCases() {
		t.Run(tc.name, func(t *testing.T) {
			idx, err := ParseIndex([]byte(tc.data))
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if len(idx.WeightMap) == 0 {
					t.Fatal("empty weight map")
				}
				return
			}
			if !errors.Is(err, ErrIndex) {
				t.Fatalf("error %v, want ErrIndex", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.msg) || !strings.HasPrefix(msg, "hfcache: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q does not contain %q", msg, tc.msg)
			}
		})
	}
	idx, err := ParseIndex([]byte(indexCases()[0].data))
	if err != nil || idx.TotalSize != 12 || idx.WeightMap["b"] != "m2.safetensors" {
		t.Errorf("good: %+v, %v", idx, err)
	}
	idx, _ = ParseIndex([]byte(`{"metadata":{"total_size":1.2e3},"weight_map":{"a":"m.safetensors"}}`))
	if idx.TotalSize != 1200 {
		t.Errorf("1.2e3 -> %d", idx.TotalSize)
	}
	if _, err := ParseIndex(make([]byte, MaxIndexBytes+1)); !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), "cap") {
		t.Errorf("oversized: %v", err)
	}
}

func TestParseIndexTiny(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(tinyFlat, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ParseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	if idx.TotalSize != tinyTotalSize || len(idx.WeightMap) != tinyTensors {
		t.Errorf("total_size %d, %d tensors", idx.TotalSize, len(idx.WeightMap))
	}
}
