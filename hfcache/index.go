package hfcache

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// IndexFile and SingleFile are the file names of a sharded and of a
// single-file safetensors checkpoint (huggingface_hub constants).
const (
	IndexFile  = "model.safetensors.index.json"
	SingleFile = "model.safetensors"
)

// MaxIndexBytes caps the size of model.safetensors.index.json.
const MaxIndexBytes = 64 << 20

// Index is the content of model.safetensors.index.json.
type Index struct {
	// WeightMap maps every tensor name to the shard holding it (a path
	// relative to the snapshot folder, '/'-separated).
	WeightMap map[string]string
	// TotalSize is metadata.total_size (0 when absent). It is informative:
	// writers compute it in different ways, so nothing checks it.
	TotalSize int64
}

// ParseIndex parses model.safetensors.index.json. weight_map is required and
// must not be empty; tensor names must be non-empty; shard names must be
// plain relative file names or '/'-separated sub-paths, without "." or ".."
// elements, absolute paths, backslashes or empty elements. Keys may not
// repeat. metadata.total_size, when present, must be a non-negative integer.
// Other keys are ignored. Errors wrap ErrIndex.
func ParseIndex(data []byte) (*Index, error) {
	return parseIndex(data, "")
}

func parseIndex(data []byte, where string) (*Index, error) {
	if len(data) > MaxIndexBytes {
		return nil, fail(ErrIndex, where, "index is %d bytes, over the %d-byte cap", len(data), MaxIndexBytes)
	}
	if !utf8.Valid(data) {
		return nil, fail(ErrIndex, where, "index is not valid UTF-8")
	}
	w := newWalker(data)
	if err := w.delim('{', "the index"); err != nil {
		return nil, fail(ErrIndex, where, "%v", err)
	}
	idx := &Index{}
	seen := make(map[string]bool)
	for {
		k, ok, err := w.key()
		if err != nil {
			return nil, fail(ErrIndex, where, "%v", err)
		}
		if !ok {
			break
		}
		if seen[k] {
			return nil, fail(ErrIndex, where, "key %s appears twice", quote(k))
		}
		seen[k] = true
		switch k {
		case "weight_map":
			if idx.WeightMap, err = scanWeightMap(w); err != nil {
				return nil, fail(ErrIndex, where, "weight_map: %v", err)
			}
		case "metadata":
			if idx.TotalSize, err = scanIndexMetadata(w); err != nil {
				return nil, fail(ErrIndex, where, "metadata: %v", err)
			}
		default:
			if err := w.skip(); err != nil {
				return nil, fail(ErrIndex, where, "%v", err)
			}
		}
	}
	if err := w.end(); err != nil {
		return nil, fail(ErrIndex, where, "%v", err)
	}
	if idx.WeightMap == nil {
		return nil, fail(ErrIndex, where, "no weight_map")
	}
	if len(idx.WeightMap) == 0 {
		return nil, fail(ErrIndex, where, "weight_map is empty")
	}
	return idx, nil
}

func scanWeightMap(w *walker) (map[string]string, error) {
	if err := w.delim('{', "weight_map"); err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for {
		k, ok, err := w.key()
		if err != nil {
			return nil, err
		}
		if !ok {
			return m, nil
		}
		if k == "" {
			return nil, fmt.Errorf("a tensor has an empty name")
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("tensor %s appears twice", quote(k))
		}
		tok, err := w.next()
		if err != nil {
			return nil, err
		}
		shard, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("tensor %s: shard is %s, not a string", quote(k), describe(tok))
		}
		if err := checkRelPath(shard); err != nil {
			return nil, fmt.Errorf("tensor %s: shard %s %v", quote(k), quote(shard), err)
		}
		m[k] = shard
	}
}

// scanIndexMetadata reads the metadata object and returns total_size.
func scanIndexMetadata(w *walker) (int64, error) {
	tok, err := w.next()
	if err != nil {
		return 0, err
	}
	if tok == nil {
		return 0, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, fmt.Errorf("is %s, not an object", describe(tok))
	}
	var total int64
	seen := make(map[string]bool)
	for {
		k, ok, err := w.key()
		if err != nil {
			return 0, err
		}
		if !ok {
			return total, nil
		}
		if seen[k] {
			return 0, fmt.Errorf("key %s appears twice", quote(k))
		}
		seen[k] = true
		if k != "total_size" {
			if err := w.skip(); err != nil {
				return 0, err
			}
			continue
		}
		tok, err := w.next()
		if err != nil {
			return 0, err
		}
		switch v := tok.(type) {
		case nil:
		case json.Number:
			if total, err = parseSize(v); err != nil {
				return 0, fmt.Errorf("total_size: %v", err)
			}
		default:
			return 0, fmt.Errorf("total_size is %s, not an integer", describe(tok))
		}
	}
}

// parseSize accepts a non-negative integer, also written as an integral
// float (some writers emit 1.2e10).
func parseSize(n json.Number) (int64, error) {
	if v, err := parseCount(n); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f >= 1<<63 {
		return 0, fmt.Errorf("%s is not a non-negative integer fitting int64", clip(string(n)))
	}
	return int64(f), nil
}

// checkRelPath accepts a plain relative file name or a '/'-separated
// sub-path that stays inside the folder. It returns a predicate phrase.
func checkRelPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("is empty")
	case strings.ContainsRune(p, '\\'):
		return fmt.Errorf("contains a backslash")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("contains a NUL byte")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("is an absolute path")
	}
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "":
			return fmt.Errorf("has an empty path element")
		case ".", "..":
			return fmt.Errorf("has a %q path element", el)
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("is not a local path on this system")
	}
	return nil
}
