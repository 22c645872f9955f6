package enginepack

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const wideSnapshots = "../../testdata/wide/hub/models--dgq-test--diffusiongemma-wide/snapshots/*"

func wideSnapshot(t *testing.T) string {
	t.Helper()
	dirs, err := filepath.Glob(wideSnapshots)
	if err != nil || len(dirs) != 1 {
		t.Fatalf("wide fixture snapshot: %v %v", dirs, err)
	}
	return dirs[0]
}

// TestWriteWideFixture writes the real fixture checkpoint with three
// profiles and an overlay: every tensor's length follows its kind's formula,
// the blob ends where the last tensor ends, and the padding between tensors
// is what the alignment rules allow.
func TestWriteWideFixture(t *testing.T) {
	src := wideSnapshot(t)
	snap, err := ReadSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	base := &BaseModel{Repo: "dgq-test/diffusiongemma-wide", Revision: filepath.Base(src)}
	cases := []struct {
		name string
		opts Options
		want map[string]int // kind counts
		ver  uint32
	}{
		{"q4", Options{Profile: "q4"}, map[string]int{KindQ4: 16, KindQ8: 3}, 1},
		{"q6", Options{Profile: "q6"}, map[string]int{KindQ6: 16, KindQ8: 3}, 1},
		{"nvfp4", Options{Profile: "nvfp4"}, map[string]int{KindQ8: 3}, 2},
		{"q4 overlay", Options{Profile: "q4", Overlay: base}, map[string]int{KindQ4: 16, KindQ8: 3}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "pack")
			if err := Write(src, out, c.opts); err != nil {
				t.Fatal(err)
			}
			m, err := ReadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			if m.Version != c.ver || len(m.Tensors) != len(snap.Names) || len(snap.Names) != 204 {
				t.Fatalf("version %d, %d tensors of %d", m.Version, len(m.Tensors), len(snap.Names))
			}
			counts := checkWideSizes(t, m, snap, mustRead(t, filepath.Join(out, BlobFile)), c.opts.Overlay != nil)
			for kind, n := range c.want {
				if counts[kind] != n {
					t.Errorf("%d %s tensors, want %d (all: %v)", counts[kind], kind, n, counts)
				}
			}
			if c.opts.Profile == "nvfp4" && counts[KindNVFP4] <= 16 {
				t.Errorf("nvfp4 profile left the linears raw: %v", counts)
			}
			for _, f := range SideFiles {
				if !bytes.Equal(mustRead(t, filepath.Join(out, f)), mustRead(t, filepath.Join(src, f))) {
					t.Errorf("side file %s differs", f)
				}
			}
		})
	}
}

// checkWideSizes checks lengths and the blob's extent, and returns the kind
// counts.
func checkWideSizes(t *testing.T, m *Manifest, snap *Snapshot, blob []byte, layered bool) map[string]int {
	counts := map[string]int{}
	var dataBytes, localEnd, canonEnd uint64
	local := 0
	for _, e := range m.Tensors {
		counts[e.Kind]++
		src := snap.Tensors[e.Name]
		want := wideLen(src, e.Kind)
		if e.ByteLen != want {
			t.Errorf("%s (%s %v): byte_len %d, want %d", e.Name, e.Kind, e.Shape, e.ByteLen, want)
		}
		canonEnd = e.Offset + e.ByteLen
		if e.Source != nil && e.Source.Kind == "external" {
			checkWideExternal(t, m, snap, e)
			continue
		}
		off := e.Offset
		if e.Source != nil {
			off = e.Source.LocalOffset
		}
		dataBytes += e.ByteLen
		localEnd = off + e.ByteLen
		local++
	}
	if uint64(len(blob)) != localEnd {
		t.Errorf("blob %d bytes, last local tensor ends at %d", len(blob), localEnd)
	}
	if !layered && localEnd != canonEnd {
		t.Errorf("self-contained: local end %d, canonical end %d", localEnd, canonEnd)
	}
	if pad := uint64(len(blob)) - dataBytes; pad > uint64(63*local+16383) {
		t.Errorf("%d bytes of padding for %d local tensors", pad, local)
	}
	if m.ExpertSplit == nil || *m.ExpertSplit%ExpertSplitAlign != 0 {
		t.Errorf("expert_split %v", m.ExpertSplit)
	}
	return counts
}

// wideLen is each kind's size formula for the tensor's source shape.
func wideLen(src *Tensor, kind string) uint64 {
	s := src.Shape
	if kind == KindRaw {
		return uint64(len(src.Data))
	}
	mats, n, k := uint64(1), uint64(s[len(s)-2]), uint64(s[len(s)-1])
	if len(s) == 3 {
		mats = uint64(s[0])
	}
	per := map[string]uint64{KindQ4: n * k / 32 * 20, KindQ6: n * k / 32 * 28, KindQ8: n * (2 + k), KindNVFP4: 4 + n*k*9/16}[kind]
	return mats * per
}

func checkWideExternal(t *testing.T, m *Manifest, snap *Snapshot, e TensorEntry) {
	f := m.ExternalFiles[e.Source.File]
	shard := mustRead(t, filepath.Join(snap.Dir, f.Path))
	src := snap.Tensors[e.Name]
	end := e.Source.Offset + e.ByteLen
	if f.ExpectedSize != uint64(len(shard)) || end > uint64(len(shard)) || !bytes.Equal(shard[e.Source.Offset:end], src.Data) {
		t.Errorf("%s: external reference %s+%d does not reach its bytes", e.Name, f.Path, e.Source.Offset)
	}
	if !strings.HasSuffix(f.Path, ".safetensors") || len(f.HeaderSHA256) != 64 {
		t.Errorf("%s: file entry %+v", e.Name, f)
	}
}

// TestWideSnapshotIsBF16: the fixture holds only BF16 tensors, so the
// engine's read-everything-as-bf16 quantizer and this package agree on it.
func TestWideSnapshotIsBF16(t *testing.T) {
	snap, err := ReadSnapshot(wideSnapshot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range snap.Names {
		if d := snap.Tensors[n].DType; d != "BF16" {
			t.Errorf("%s is %s", n, d)
		}
	}
	if _, err := os.Stat(filepath.Join(snap.Dir, IndexFile)); err != nil {
		t.Error(err)
	}
}
