package enginepack

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// IndexFile is the name of a sharded checkpoint's index.
const IndexFile = "model.safetensors.index.json"

// Tensor is one tensor of a snapshot.
type Tensor struct {
	Name string
	// DType as the engine names it: F32, F16, BF16, I32, I64, BOOL, or
	// UNKNOWN for anything else (the engine writes that word verbatim).
	DType string
	Shape []int64
	// Shard is the file name inside the snapshot directory.
	Shard string
	// Offset is the absolute byte offset of the data in the shard:
	// 8 + header length + data_offsets[0].
	Offset int64
	// Data is the tensor's bytes (data_offsets[1] - data_offsets[0] of them).
	Data []byte
}

// Shard describes one safetensors file of a snapshot.
type Shard struct {
	Name string
	Size int64
	// HeaderSHA256 is the hex SHA-256 of the 8-byte length prefix followed
	// by the JSON header: the engine's pin of a shard in a layered pack.
	HeaderSHA256 string
}

// Snapshot is a checkpoint directory read into memory.
type Snapshot struct {
	Dir     string
	Names   []string // every tensor name, byte-wise sorted
	Tensors map[string]*Tensor
	Shards  map[string]*Shard
}

type headerEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// shardFile is a parsed shard: its description and its tensors by name.
type shardFile struct {
	info    Shard
	tensors map[string]*Tensor
}

// ReadSnapshot reads dir. With model.safetensors.index.json, the tensors
// are the index's weight_map keys, each read from the shard the map names
// (the engine requires the index; the fallback below is a convenience).
// Without it, every *.safetensors file in dir is read and every tensor in
// them is taken.
func ReadSnapshot(dir string) (*Snapshot, error) {
	wm, err := readWeightMap(dir)
	if err != nil {
		return nil, err
	}
	if wm == nil {
		wm, err = weightMapFromShards(dir)
		if err != nil {
			return nil, err
		}
	}
	return snapshotFromWeightMap(dir, wm)
}

func readWeightMap(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("enginepack: read index: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("enginepack: parse %s: %w", IndexFile, err)
	}
	if idx.WeightMap == nil {
		return nil, fmt.Errorf("enginepack: %s has no weight_map", IndexFile)
	}
	return idx.WeightMap, nil
}

func weightMapFromShards(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("enginepack: list shards: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("enginepack: %s: no %s and no *.safetensors files", dir, IndexFile)
	}
	sort.Strings(files)
	wm := map[string]string{}
	for _, f := range files {
		sf, err := readShard(dir, filepath.Base(f))
		if err != nil {
			return nil, err
		}
		for name := range sf.tensors {
			if prev, dup := wm[name]; dup {
				return nil, fmt.Errorf("enginepack: tensor %s is in both %s and %s", name, prev, sf.info.Name)
			}
			wm[name] = sf.info.Name
		}
	}
	return wm, nil
}

func snapshotFromWeightMap(dir string, wm map[string]string) (*Snapshot, error) {
	s := &Snapshot{Dir: dir, Tensors: map[string]*Tensor{}, Shards: map[string]*Shard{}}
	files := map[string]*shardFile{}
	for name, shard := range wm {
		sf, ok := files[shard]
		if !ok {
			var err error
			if sf, err = readShard(dir, shard); err != nil {
				return nil, err
			}
			files[shard] = sf
			s.Shards[shard] = &sf.info
		}
		t, ok := sf.tensors[name]
		if !ok {
			return nil, fmt.Errorf("enginepack: tensor %s: not in the header of %s", name, shard)
		}
		s.Tensors[name] = t
		s.Names = append(s.Names, name)
	}
	slices.Sort(s.Names)
	return s, nil
}

// readShard reads and parses one safetensors file.
func readShard(dir, name string) (*shardFile, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("enginepack: read shard: %w", err)
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("enginepack: shard %s: file too small", name)
	}
	hlen := binary.LittleEndian.Uint64(b)
	if hlen > uint64(len(b)-8) {
		return nil, fmt.Errorf("enginepack: shard %s: header length %d past the end of the file", name, hlen)
	}
	header := b[:8+hlen]
	sum := sha256.Sum256(header)
	sf := &shardFile{
		info:    Shard{Name: name, Size: int64(len(b)), HeaderSHA256: hex.EncodeToString(sum[:])},
		tensors: map[string]*Tensor{},
	}
	if err := parseHeader(sf, header[8:], b[8+hlen:]); err != nil {
		return nil, fmt.Errorf("enginepack: shard %s: %w", name, err)
	}
	return sf, nil
}

func parseHeader(sf *shardFile, header, data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return fmt.Errorf("parse header: %w", err)
	}
	base := int64(8 + len(header))
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return fmt.Errorf("tensor %s: %w", name, err)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > int64(len(data)) {
			return fmt.Errorf("tensor %s: data offsets [%d, %d] outside the %d-byte data region", name, begin, end, len(data))
		}
		sf.tensors[name] = &Tensor{
			Name: name, DType: engineDType(e.DType), Shape: e.Shape, Shard: sf.info.Name,
			Offset: base + begin, Data: data[begin:end:end],
		}
	}
	return nil
}

// engineDType is the engine's reading of a safetensors dtype string.
func engineDType(s string) string {
	switch s {
	case "F32", "F16", "BF16", "I32", "I64", "BOOL":
		return s
	}
	return "UNKNOWN"
}
