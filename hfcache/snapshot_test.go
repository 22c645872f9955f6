package hfcache

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

const (
	tinyRev       = "908e7097997c140d18cca0ed34c0edf38e091034"
	tinyTensors   = 158
	tinyTotalSize = 1353400
)

// The tiny checkpoint is materialized from the embedded copy in
// dgq/testmodel, once as a Hugging Face cache entry (symlinks into blobs/)
// and once as a flat folder of plain files.
var (
	tinyRepo string
	tinyFlat string
	tinyHub  string
)

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "hfcache-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tinyHub, err = testmodel.WriteHubCache(filepath.Join(root, "hub"))
	if err == nil {
		tinyFlat, err = testmodel.WriteSnapshot(filepath.Join(root, "flat"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tinyRepo = filepath.Dir(filepath.Dir(tinyHub))
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

// hubSnapshot returns the symlinked snapshot folder, skipping the test where
// the checkout did not create symlinks (core.symlinks=false, e.g. Windows).
func hubSnapshot(t *testing.T) string {
	t.Helper()
	if _, err := os.Readlink(filepath.Join(tinyHub, IndexFile)); err != nil {
		t.Skipf("the test data's snapshot entries are not symlinks here: %v", err)
	}
	return tinyHub
}

func openT(t *testing.T, dir string) *Snapshot {
	t.Helper()
	s, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatalf("OpenSnapshot(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTinyLayout checks the test data itself: real symlinks into blobs/,
// blobs named by their content hash, refs/main naming the revision.
func TestTinyLayout(t *testing.T) {
	blobs, err := os.ReadDir(filepath.Join(tinyRepo, "blobs"))
	if err != nil || len(blobs) != 9 {
		t.Fatalf("blobs: %d, %v", len(blobs), err)
	}
	for _, b := range blobs {
		data, err := os.ReadFile(filepath.Join(tinyRepo, "blobs", b.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var sum string
		if len(b.Name()) == 64 { // LFS file: sha256
			s := sha256.Sum256(data)
			sum = hex.EncodeToString(s[:])
		} else { // small file: git blob sha1
			h := sha1.New()
			fmt.Fprintf(h, "blob %d\x00", len(data))
			h.Write(data)
			sum = hex.EncodeToString(h.Sum(nil))
		}
		if sum != b.Name() {
			t.Errorf("blob %s hashes to %s", b.Name(), sum)
		}
	}
	ref, err := os.ReadFile(filepath.Join(tinyRepo, "refs", "main"))
	if err != nil || strings.TrimSpace(string(ref)) != tinyRev {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	hubSnapshot(t)
	entries, err := os.ReadDir(tinyHub)
	if err != nil || len(entries) != 9 {
		t.Fatalf("snapshot: %d entries, %v", len(entries), err)
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(tinyHub, e.Name()))
		if err != nil {
			t.Errorf("%s is not a symlink: %v", e.Name(), err)
			continue
		}
		if !strings.HasPrefix(target, "../../blobs/") {
			t.Errorf("%s -> %s", e.Name(), target)
		}
		flat, err1 := os.ReadFile(filepath.Join(tinyFlat, e.Name()))
		linked, err2 := os.ReadFile(filepath.Join(tinyHub, e.Name()))
		if err1 != nil || err2 != nil || !bytes.Equal(flat, linked) {
			t.Errorf("%s: flat and linked copies differ (%v, %v)", e.Name(), err1, err2)
		}
	}
}

func TestOpenSnapshotTiny(t *testing.T) {
	hub, flat := openT(t, hubSnapshot(t)), openT(t, tinyFlat)
	ht, ft := hub.Tensors(), flat.Tensors()
	if len(ht) != tinyTensors || len(ft) != tinyTensors {
		t.Fatalf("%d and %d tensors, want %d", len(ht), len(ft), tinyTensors)
	}
	if hub.Index == nil || hub.Index.TotalSize != tinyTotalSize || len(hub.Index.WeightMap) != tinyTensors {
		t.Fatalf("index %+v", hub.Index)
	}
	if len(hub.Shards) != 4 || hub.Shards[0].Name != "model-00001-of-00004.safetensors" || hub.Shards[3].Name != "model-00004-of-00004.safetensors" {
		t.Fatalf("shards %v", hub.Shards)
	}
	files := map[string][]byte{}
	var total int64
	for i := range ht {
		h, f := ht[i], ft[i]
		if h.Name != f.Name || h.DType != f.DType || !slices.Equal(h.Shape, f.Shape) || h.Offset != f.Offset || h.Size != f.Size || h.Shard.Name != f.Shard.Name {
			t.Fatalf("tensor %d: %+v vs %+v", i, h.TensorInfo, f.TensorInfo)
		}
		if i > 0 && ht[i-1].Name >= h.Name {
			t.Fatalf("not sorted by name: %q, %q", ht[i-1].Name, h.Name)
		}
		if want := hub.Index.WeightMap[h.Name]; want != h.Shard.Name {
			t.Errorf("%s in %s, index says %s", h.Name, h.Shard.Name, want)
		}
		raw, ok := files[h.Shard.Name]
		if !ok {
			var err error
			if raw, err = os.ReadFile(filepath.Join(tinyFlat, h.Shard.Name)); err != nil {
				t.Fatal(err)
			}
			files[h.Shard.Name] = raw
			if int64(len(raw)) != h.Shard.Size {
				t.Errorf("shard %s: Size %d, file %d", h.Shard.Name, h.Shard.Size, len(raw))
			}
		}
		want := raw[h.Offset : h.Offset+h.Size]
		if !bytes.Equal(h.Bytes(), want) || !bytes.Equal(f.Bytes(), want) {
			t.Errorf("%s: Bytes differ from the file", h.Name)
		}
		if len(h.Bytes()) != int(h.Size) || cap(h.Bytes()) != int(h.Size) {
			t.Errorf("%s: len %d cap %d", h.Name, len(h.Bytes()), cap(h.Bytes()))
		}
		total += h.Size
	}
	if total != tinyTotalSize {
		t.Errorf("sum of sizes %d, index total_size %d", total, tinyTotalSize)
	}
	// Tensors returns a copy.
	ht[0].Name = "changed"
	if hub.Tensors()[0].Name == "changed" {
		t.Error("Tensors shares its slice")
	}
}

func TestSnapshotReadFile(t *testing.T) {
	s := openT(t, hubSnapshot(t))
	cfg, err := s.ReadFile("config.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(cfg, &v); err != nil {
		t.Fatalf("config.json: %v", err)
	}
	want, _ := os.ReadFile(filepath.Join(tinyFlat, "config.json"))
	if !bytes.Equal(cfg, want) {
		t.Error("config.json differs")
	}
	if _, err := s.ReadFile("config.json", 100); !errors.Is(err, ErrFileTooLarge) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("cap: %v", err)
	}
	if _, err := s.ReadFile("chat_template.jinja", 1<<20); !errors.Is(err, ErrMissingFile) || !strings.Contains(err.Error(), "chat_template.jinja does not exist") {
		t.Errorf("missing: %v", err)
	}
	for _, bad := range []string{"../config.json", "/etc/passwd", "a\\b", "", "./config.json"} {
		if _, err := s.ReadFile(bad, 1<<20); err == nil {
			t.Errorf("ReadFile(%q) accepted", bad)
		}
	}
}

func TestSnapshotClose(t *testing.T) {
	s, err := OpenSnapshot(tinyFlat)
	if err != nil {
		t.Fatal(err)
	}
	ref := s.Tensors()[0]
	if len(ref.Bytes()) == 0 {
		t.Fatal("no bytes")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ref.Bytes() != nil {
		t.Error("Bytes after Close is not nil")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ref.Shard.Release(0, 1<<20) // no effect once closed
	ref.Shard.WillNeed(0, 1<<20)
}

func TestShardReleaseWillNeed(t *testing.T) {
	s := openT(t, hubSnapshot(t))
	for _, sh := range s.Shards {
		raw, err := os.ReadFile(filepath.Join(tinyFlat, sh.Name))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int64{{0, sh.Size}, {1, 1}, {100, 9000}, {-5, 10}, {sh.Size - 3, 100}, {sh.Size, 1}, {0, 0}, {10, -1},
			{1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64}, {math.MinInt64, 1}} {
			sh.WillNeed(r[0], r[1])
			sh.Release(r[0], r[1])
		}
		for _, ti := range sh.Header.Tensors {
			ref := TensorRef{TensorInfo: ti, Shard: sh}
			sh.WillNeed(ti.Offset, ti.Size)
			if !bytes.Equal(ref.Bytes(), raw[ti.Offset:ti.Offset+ti.Size]) {
				t.Fatalf("%s: bytes differ after Release", ti.Name)
			}
			sh.Release(ti.Offset, ti.Size)
		}
		sh.Release(0, sh.Size)
		ti := sh.Header.Tensors[len(sh.Header.Tensors)-1]
		if !bytes.Equal(TensorRef{TensorInfo: ti, Shard: sh}.Bytes(), raw[ti.Offset:]) {
			t.Fatalf("%s: bytes differ after releasing everything", ti.Name)
		}
	}
}

// writeSnapshot writes a snapshot folder: files maps names to contents.
func writeSnapshot(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// shardOf builds a shard holding F32 tensors of shape [1] with the given names.
func shardOf(names ...string) []byte {
	var es []string
	for i, n := range names {
		es = append(es, ent(n, "F32", "[1]", int64(4*i), int64(4*i+4)))
	}
	return stFile(hdr(es...), seq(4*len(names)))
}

func indexOf(m map[string]string) []byte {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 4 * len(m)}, "weight_map": m})
	if err != nil {
		panic(err)
	}
	return b
}

func TestOpenSnapshotInventory(t *testing.T) {
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	cases := []struct {
		name  string
		files map[string][]byte
		want  error
		msg   []string
	}{
		{name: "consistent", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1, "b": s1, "c": s2}),
			s1:        shardOf("a", "b"), s2: shardOf("c"),
			"extra.safetensors": []byte("not read"),
		}},
		{name: "sub-path shard", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": "sub/x.safetensors"}), "sub/x.safetensors": shardOf("a"),
		}},
		{name: "tensor missing from the shard", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1, "b": s1, "c": s1}), s1: shardOf("a", "b"),
		}, want: ErrInventory, msg: []string{`tensor "c" is listed in shard ` + s1 + `, which does not hold it`, IndexFile}},
		{name: "extra tensor in a shard", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1}), s1: shardOf("a", "x"),
		}, want: ErrInventory, msg: []string{`shard ` + s1 + ` holds tensor "x", which the index does not list`}},
		{name: "shard missing", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1, "c": s2}), s1: shardOf("a"),
		}, want: ErrMissingFile, msg: []string{s2 + " does not exist"}},
		{name: "tensor in two shards", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1, "b": s2}), s1: shardOf("a"), s2: shardOf("a", "b"),
		}, want: ErrInventory, msg: []string{`tensor "a" is in both shard ` + s1 + ` and shard ` + s2}},
		{name: "tensor in the wrong shard", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s2, "b": s2, "c": s1}), s1: shardOf("a", "c"), s2: shardOf("b"),
		}, want: ErrInventory, msg: []string{`tensor "a" is listed in shard ` + s2 + ` but is in shard ` + s1}},
		{name: "unsupported dtype in a shard", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1, "w": s1}),
			s1:        stFile(hdr(ent("a", "BF16", "[2]", 0, 4), ent("w", "F8_E4M3", "[4]", 4, 8)), seq(8)),
		}, want: ErrUnsupportedDType, msg: []string{"shard ", s1 + `: tensor "w" has dtype F8_E4M3, which dgq cannot read (supported: BF16, F16, F32)`}},
		{name: "empty shard file", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1}), s1: {},
		}, want: ErrSafetensors, msg: []string{s1 + ": file is 0 bytes, too short"}},
		{name: "truncated shard", files: map[string][]byte{
			IndexFile: indexOf(map[string]string{"a": s1, "b": s1}), s1: shardOf("a", "b")[:40],
		}, want: ErrSafetensors, msg: []string{s1}},
		{name: "bad index", files: map[string][]byte{
			IndexFile: []byte(`{"weight_map":{"a":"../model.safetensors"}}`),
		}, want: ErrIndex, msg: []string{IndexFile + `: weight_map: tensor "a": shard "../model.safetensors" has a ".." path element`}},
		{name: "index without weight_map", files: map[string][]byte{
			IndexFile: []byte(`{"metadata":{}}`),
		}, want: ErrIndex, msg: []string{"no weight_map"}},
		{name: "neither file", files: map[string][]byte{"config.json": []byte("{}")},
			want: ErrMissingFile, msg: []string{"holds neither " + IndexFile + " nor " + SingleFile}},
		{name: "single file", files: map[string][]byte{SingleFile: shardOf("x", "y")}},
		{name: "single file preferred over index", files: map[string][]byte{
			SingleFile: shardOf("x"), IndexFile: indexOf(map[string]string{"a": s1}),
		}},
		{name: "bad single file", files: map[string][]byte{SingleFile: stFile(hdr(ent("a", "F32", "[1]", 0, 4), ent("a", "F32", "[1]", 4, 8)), seq(8))},
			want: ErrDuplicateTensor, msg: []string{SingleFile + `: tensor "a" appears twice`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeSnapshot(t, tc.files)
			s, err := OpenSnapshot(dir)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				for _, ref := range s.Tensors() {
					if len(ref.Bytes()) != 4 {
						t.Errorf("%s: %d bytes", ref.Name, len(ref.Bytes()))
					}
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("opened, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
			msg := err.Error()
			for _, m := range tc.msg {
				if !strings.Contains(msg, m) {
					t.Errorf("error %q does not contain %q", msg, m)
				}
			}
			if !strings.HasPrefix(msg, "hfcache: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one line prefixed hfcache:", msg)
			}
		})
	}
}

func TestOpenSnapshotSymlinks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks")
	}
	// A hub layout built here: one good link, one dangling (interrupted download).
	root := t.TempDir()
	snap := filepath.Join(root, "snapshots", "rev")
	blobs := filepath.Join(root, "blobs")
	for _, d := range []string{snap, blobs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(blobs, "idx"), indexOf(map[string]string{"a": s1, "b": s2}))
	write(filepath.Join(blobs, "one"), shardOf("a"))
	for name, target := range map[string]string{IndexFile: "idx", s1: "one", s2: "two"} {
		if err := os.Symlink("../../blobs/"+target, filepath.Join(snap, name)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := OpenSnapshot(snap)
	if !errors.Is(err, ErrMissingFile) || !strings.Contains(err.Error(), s2+" is a dangling symlink to ../../blobs/two") {
		t.Fatalf("dangling: %v", err)
	}
	write(filepath.Join(blobs, "two"), shardOf("b"))
	s, err := OpenSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Tensors(); len(got) != 2 || got[1].Shard.Name != s2 {
		t.Errorf("tensors %+v", got)
	}

	// A dangling single-file link is reported, not skipped.
	single := filepath.Join(root, "snapshots", "single")
	if err := os.MkdirAll(single, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../blobs/missing", filepath.Join(single, SingleFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSnapshot(single); !errors.Is(err, ErrMissingFile) || !strings.Contains(err.Error(), "dangling") {
		t.Errorf("dangling single file: %v", err)
	}
}

func TestOpenSnapshotNoFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	if _, err := OpenSnapshot(dir); !errors.Is(err, ErrMissingFile) || !strings.Contains(err.Error(), "nope does not exist") {
		t.Errorf("missing folder: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := OpenSnapshot(file); !errors.Is(err, ErrMissingFile) {
		t.Errorf("file as folder: %v", err)
	}
	// A directory where a shard should be.
	dir = writeSnapshot(t, map[string][]byte{IndexFile: indexOf(map[string]string{"a": "d.safetensors"}), "d.safetensors/x": nil})
	if _, err := OpenSnapshot(dir); !errors.Is(err, ErrSafetensors) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory shard: %v", err)
	}
}
