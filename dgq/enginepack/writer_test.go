package enginepack

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	shardA  = "model-00001-of-00002.safetensors"
	shardB  = "model-00002-of-00002.safetensors"
	nEmbed  = "model.decoder.embed_tokens.weight"
	nLN     = "model.decoder.layers.0.input_layernorm.weight"
	nQ      = "model.decoder.layers.0.self_attn.q_proj.weight"
	nMLP    = "model.decoder.layers.0.mlp.down_proj.weight"
	nS2     = "model.decoder.layers.2.layer_scalar"
	nS10    = "model.decoder.layers.10.layer_scalar"
	nGateUp = "model.decoder.layers.0.experts.gate_up_proj"
	nDown   = "model.decoder.layers.0.experts.down_proj"
	nSC     = "model.decoder.self_conditioning.gate_proj.weight"
	nNorm   = "model.decoder.norm.weight"
)

// synthShards is a small checkpoint named like the real model: odd-sized
// and F32 tensors make the 64-byte padding visible, and layers.10 sorts
// before layers.2 byte-wise.
func synthShards() map[string][]testTensor {
	return map[string][]testTensor{
		shardA: {
			bf16Tensor(nEmbed, 1, 16, 32), bf16Tensor(nLN, 2, 33), bf16Tensor(nQ, 3, 64, 32),
			f32Tensor(nS2, 0.5), f32Tensor(nS10, 0.25, 0.125, 1),
		},
		shardB: {
			bf16Tensor(nGateUp, 4, 4, 64, 32), bf16Tensor(nDown, 5, 4, 32, 32), bf16Tensor(nSC, 6, 64, 32),
			bf16Tensor(nNorm, 7, 32), bf16Tensor(nMLP, 8, 32, 64),
		},
	}
}

// baseKinds is the expected kind of each synthetic tensor per profile,
// spelled out rather than computed.
func baseKind(name, profile string) string {
	switch name {
	case nQ, nMLP:
		if profile == "nvfp4" {
			return KindNVFP4
		}
	case nSC:
		return KindQ8
	case nGateUp, nDown:
		return map[string]string{"q4": KindQ4, "q5": KindQ4, "q6": KindQ6, "nvfp4": KindNVFP4, "nvfp4_experts": KindNVFP4}[profile]
	}
	return KindRaw
}

var synthClass = map[string]string{nQ: ClassAttn, nMLP: ClassDense, nSC: ClassSC, nGateUp: ClassExpertsGateUp, nDown: ClassExpertsDown}

// expectedLen is each kind's size formula, written independently of
// MatrixBytes.
func expectedLen(tt testTensor, kind string) uint64 {
	s := tt.shape
	mats, n, k := uint64(1), uint64(0), uint64(s[len(s)-1])
	if len(s) >= 2 {
		n = uint64(s[len(s)-2])
	}
	if len(s) == 3 {
		mats = uint64(s[0])
	}
	switch kind {
	case KindQ4:
		return mats * n * k / 32 * 20
	case KindQ6:
		return mats * n * k / 32 * 28
	case KindQ8:
		return n * (k + 2)
	case KindNVFP4:
		return mats * (4 + n*k/2 + n*k/16)
	}
	return uint64(len(tt.data))
}

type writeCase struct {
	name    string
	opts    Options
	version uint32
	refPack string // a plain pack written first, for PackBinFrom
}

func writeCases() []writeCase {
	base := &BaseModel{Repo: "dgq-test/synthetic", Revision: strings.Repeat("ab", 20)}
	nvExperts := map[string]string{ClassExpertsGateUp: "nvfp4", ClassExpertsDown: "nvfp4"}
	return []writeCase{
		{name: "q4", opts: Options{Profile: "q4"}, version: 1},
		{name: "q5", opts: Options{Profile: "q5"}, version: 1},
		{name: "q6", opts: Options{Profile: "q6"}, version: 1},
		{name: "nvfp4", opts: Options{Profile: "nvfp4"}, version: 2},
		{name: "nvfp4_experts", opts: Options{Profile: "nvfp4_experts"}, version: 2},
		{name: "q4+experts=nvfp4", opts: Options{Profile: "q4", Overrides: nvExperts}, version: 4},
		{name: "q4+attn=q8,dense=q4", opts: Options{Profile: "q4", Overrides: map[string]string{ClassAttn: "q8_row", ClassDense: "q4"}}, version: 4},
		{name: "q4 overlay", opts: Options{Profile: "q4", Overlay: base}, version: 3},
		{name: "nvfp4 overlay", opts: Options{Profile: "nvfp4", Overlay: base}, version: 3},
		{name: "q6 overlay+sc=raw", opts: Options{Profile: "q6", Overlay: base, Overrides: map[string]string{ClassSC: "raw"}}, version: 4},
		{name: "q4 pre-split", opts: Options{Profile: "q4", NoExpertSplit: true}, version: 1},
		{name: "nvfp4 pre-split forced v1", opts: Options{Profile: "nvfp4", NoExpertSplit: true, ForceVersion: 1}, version: 1},
		{name: "q4 overlay pre-split", opts: Options{Profile: "q4", Overlay: base, NoExpertSplit: true}, version: 3},
		{name: "q4 pack_bin", opts: Options{Profile: "q4", PackBinFrom: "../ref/model.dgq.bin"}, version: 3, refPack: "q4"},
		{name: "nvfp4 pack_bin", opts: Options{Profile: "nvfp4", PackBinFrom: "../ref/model.dgq.bin"}, version: 3, refPack: "q4"},
	}
}

// TestWriteSynthetic writes every case from one synthetic snapshot and
// checks the pack against rules re-derived here.
func TestWriteSynthetic(t *testing.T) {
	for _, c := range writeCases() {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			src := filepath.Join(root, "snap")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			shards := synthShards()
			writeSnapshot(t, src, shards)
			if c.refPack != "" {
				if err := Write(src, filepath.Join(root, "ref"), Options{Profile: c.refPack}); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(root, "pack")
			if err := Write(src, out, c.opts); err != nil {
				t.Fatal(err)
			}
			checkPack(t, src, out, c, shards)
		})
	}
}

// packCheck carries what the per-tensor checks need.
type packCheck struct {
	t       *testing.T
	src     string
	out     string
	c       writeCase
	m       *Manifest
	blob    []byte
	covered []bool
	byName  map[string]testTensor
	shardOf map[string]string
}

func checkPack(t *testing.T, src, out string, c writeCase, shards map[string][]testTensor) {
	pc := &packCheck{t: t, src: src, out: out, c: c, byName: map[string]testTensor{}, shardOf: map[string]string{}}
	for file, ts := range shards {
		for _, tt := range ts {
			pc.byName[tt.name], pc.shardOf[tt.name] = tt, file
		}
	}
	var err error
	if pc.m, err = ReadManifest(out); err != nil {
		t.Fatal(err)
	}
	pc.blob = mustRead(t, filepath.Join(out, BlobFile))
	pc.covered = make([]bool, len(pc.blob))
	pc.checkHeader()
	pc.checkOrder()
	pc.checkLayout()
	for _, e := range pc.m.Tensors {
		pc.checkTensor(e)
	}
	for i, cov := range pc.covered {
		if !cov && pc.blob[i] != 0 {
			t.Fatalf("blob byte %d lies between tensors and is %#02x, not zero", i, pc.blob[i])
		}
	}
	pc.checkSideFiles()
}

func (pc *packCheck) layered() bool { return pc.c.opts.Overlay != nil || pc.c.opts.PackBinFrom != "" }

// checkHeader: top-level keys, version, custom classes, and that the file
// is exactly what MarshalManifest and encoding/json make of its contents.
func (pc *packCheck) checkHeader() {
	t, m := pc.t, pc.m
	file := mustRead(t, filepath.Join(pc.out, ManifestFile))
	if !bytes.Equal(MarshalManifest(m), file) || !bytes.Equal(goIndent(t, m), file) {
		t.Fatalf("manifest does not round-trip through encoding/json:\n%s", file)
	}
	if bytes.HasSuffix(file, []byte("\n")) {
		t.Error("manifest ends in a newline")
	}
	if m.Version != pc.c.version || m.Profile != pc.c.opts.Profile || m.SourceModel != pc.src || m.BlobFile != BlobFile {
		t.Errorf("header: version %d profile %s source %s blob %s", m.Version, m.Profile, m.SourceModel, m.BlobFile)
	}
	if len(m.Tensors) != len(pc.byName) {
		t.Errorf("%d tensors, want %d", len(m.Tensors), len(pc.byName))
	}
	for class, kind := range pc.c.opts.Overrides {
		if k, _ := ParseKind(kind); m.CustomClasses[class] != k {
			t.Errorf("custom_classes[%s] = %q, want %q", class, m.CustomClasses[class], k)
		}
	}
	if len(m.CustomClasses) != len(pc.c.opts.Overrides) {
		t.Errorf("custom_classes %v", m.CustomClasses)
	}
	if !reflectEqualBase(m.BaseModel, pc.c.opts.Overlay) {
		t.Errorf("base_model %+v", m.BaseModel)
	}
	if (m.ExpertSplit == nil) != pc.c.opts.NoExpertSplit {
		t.Errorf("expert_split %v with NoExpertSplit=%v", m.ExpertSplit, pc.c.opts.NoExpertSplit)
	}
	if (m.LocalExpertSplit != nil) != (pc.layered() && !pc.c.opts.NoExpertSplit) {
		t.Errorf("local_expert_split %v", m.LocalExpertSplit)
	}
}

func reflectEqualBase(a, b *BaseModel) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// checkOrder: non-experts, then experts, each in byte-wise name order.
func (pc *packCheck) checkOrder() {
	var head, tail []string
	for _, e := range pc.m.Tensors {
		if strings.Contains(e.Name, ".experts.") && len(e.Shape) == 3 {
			tail = append(tail, e.Name)
		} else {
			if len(tail) > 0 {
				pc.t.Fatalf("%s comes after an expert", e.Name)
			}
			head = append(head, e.Name)
		}
	}
	if !slices.IsSorted(head) || !slices.IsSorted(tail) || len(tail) != 2 {
		pc.t.Fatalf("order: %v then %v", head, tail)
	}
	if i, j := slices.Index(head, nS10), slices.Index(head, nS2); i > j {
		pc.t.Error("layers.10 must sort before layers.2")
	}
}

// checkLayout replays the cursors: canonical and local offsets 64-aligned,
// the first expert on a 16 KiB boundary in both spaces (unless pre-split),
// no tensor beyond its predecessor's aligned end.
func (pc *packCheck) checkLayout() {
	t, m := pc.t, pc.m
	var canon, local uint64
	split := false
	for _, e := range m.Tensors {
		canon = (canon + 63) / 64 * 64
		if !split && strings.Contains(e.Name, ".experts.") && !pc.c.opts.NoExpertSplit {
			split = true
			canon = (canon + 16383) / 16384 * 16384
			local = (local + 16383) / 16384 * 16384
			if *m.ExpertSplit != canon || canon%16384 != 0 {
				t.Errorf("expert_split %d, want %d", *m.ExpertSplit, canon)
			}
			if pc.layered() && *m.LocalExpertSplit != local {
				t.Errorf("local_expert_split %d, want %d", *m.LocalExpertSplit, local)
			}
		}
		if e.Offset != canon {
			t.Errorf("%s at canonical %d, want %d", e.Name, e.Offset, canon)
		}
		if e.Source == nil || e.Source.Kind == "local" {
			local = (local + 63) / 64 * 64
			if e.Source != nil && e.Source.LocalOffset != local {
				t.Errorf("%s at local %d, want %d", e.Name, e.Source.LocalOffset, local)
			}
			local += e.ByteLen
		}
		canon += e.ByteLen
	}
	if uint64(len(pc.blob)) != local {
		t.Errorf("blob is %d bytes, want %d", len(pc.blob), local)
	}
	if !pc.layered() && local != canon {
		t.Errorf("self-contained blob %d != canonical end %d", local, canon)
	}
}

// checkTensor: kind, dtype, shape, length, source mode, and bytes.
func (pc *packCheck) checkTensor(e TensorEntry) {
	t := pc.t
	tt := pc.byName[e.Name]
	want := baseKind(e.Name, pc.c.opts.Profile)
	if k, ok := pc.c.opts.Overrides[synthClass[e.Name]]; ok {
		want, _ = ParseKind(k)
	}
	if e.Kind != want || e.DType != tt.dtype || !slices.Equal(e.Shape, tt.shape) || e.ByteLen != expectedLen(tt, want) {
		t.Errorf("%s: kind %s dtype %s shape %v len %d; want %s %s %v %d",
			e.Name, e.Kind, e.DType, e.Shape, e.ByteLen, want, tt.dtype, tt.shape, expectedLen(tt, want))
	}
	if e.Offset%64 != 0 {
		t.Errorf("%s: offset %d not 64-aligned", e.Name, e.Offset)
	}
	wantBytes := tt.data
	if want != KindRaw {
		var err error
		if wantBytes, err = EncodeTensor(want, tt.dtype, tt.data, tt.shape); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case !pc.layered():
		if e.Source != nil {
			t.Errorf("%s: self-contained pack with a source", e.Name)
		}
		pc.checkLocal(e.Name, e.Offset, wantBytes)
	case want == KindRaw:
		pc.checkExternal(e, tt)
	default:
		if e.Source == nil || e.Source.Kind != "local" {
			t.Fatalf("%s: source %+v, want local", e.Name, e.Source)
		}
		pc.checkLocal(e.Name, e.Source.LocalOffset, wantBytes)
	}
}

func (pc *packCheck) checkLocal(name string, off uint64, want []byte) {
	end := off + uint64(len(want))
	if end > uint64(len(pc.blob)) || !bytes.Equal(pc.blob[off:end], want) {
		pc.t.Fatalf("%s: blob bytes at %d differ", name, off)
	}
	for i := off; i < end; i++ {
		pc.covered[i] = true
	}
}

// checkExternal: the reference reaches the tensor's bytes, and the file
// entry pins the file (size, and for a shard its header hash).
func (pc *packCheck) checkExternal(e TensorEntry, tt testTensor) {
	t, s := pc.t, e.Source
	if s == nil || s.Kind != "external" {
		t.Fatalf("%s: source %+v, want external", e.Name, s)
	}
	f, ok := pc.m.ExternalFiles[s.File]
	if !ok {
		t.Fatalf("%s: external file %q not listed", e.Name, s.File)
	}
	var path string
	if pc.c.opts.PackBinFrom != "" {
		path = filepath.Join(pc.out, pc.c.opts.PackBinFrom)
		if f.Role != RolePackBin || f.Path != pc.c.opts.PackBinFrom || f.HeaderSHA256 != "" || s.File != f.Path {
			t.Errorf("pack_bin entry %+v", f)
		}
	} else {
		path = filepath.Join(pc.src, pc.shardOf[e.Name])
		if f.Role != RoleHFSafetensors || f.Path != pc.shardOf[e.Name] || s.File != f.Path || f.HeaderSHA256 != headerHash(t, path) {
			t.Errorf("hf entry %s: %+v", s.File, f)
		}
	}
	b := mustRead(t, path)
	if f.ExpectedSize != uint64(len(b)) {
		t.Errorf("%s: expected_size %d, file is %d", s.File, f.ExpectedSize, len(b))
	}
	if end := s.Offset + uint64(len(tt.data)); end > uint64(len(b)) || !bytes.Equal(b[s.Offset:end], tt.data) {
		t.Errorf("%s: external bytes at %s+%d differ", e.Name, s.File, s.Offset)
	}
}

func headerHash(t *testing.T, path string) string {
	b := mustRead(t, path)
	n := binary.LittleEndian.Uint64(b)
	sum := sha256.Sum256(b[:8+n])
	return hex.EncodeToString(sum[:])
}

func (pc *packCheck) checkSideFiles() {
	for _, name := range []string{"config.json", "tokenizer.json"} {
		if !bytes.Equal(mustRead(pc.t, filepath.Join(pc.out, name)), mustRead(pc.t, filepath.Join(pc.src, name))) {
			pc.t.Errorf("side file %s differs", name)
		}
	}
	if _, err := os.Stat(filepath.Join(pc.out, "generation_config.json")); err == nil {
		pc.t.Error("generation_config.json appeared from nowhere")
	}
}

// TestWriteRefusesBadDims: an expert K that q4 cannot take fails before a
// blob exists; nvfp4 takes the same tensor.
func TestWriteRefusesBadDims(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "snap")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, src, map[string][]testTensor{shardA: {bf16Tensor(nGateUp, 1, 2, 16, 48), bf16Tensor(nNorm, 2, 48)}})
	out := filepath.Join(root, "q4")
	if err := Write(src, out, Options{Profile: "q4"}); err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Fatalf("q4 with K=48: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, BlobFile)); err == nil {
		t.Error("a blob was written before validation")
	}
	if err := Write(src, filepath.Join(root, "nv"), Options{Profile: "nvfp4"}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteRefusesBadOptions: option errors come before anything is made.
func TestWriteRefusesBadOptions(t *testing.T) {
	root := t.TempDir()
	bad := []Options{
		{Profile: "q8"},
		{Profile: "q4", Overrides: map[string]string{"embed": "q8"}},
		{Profile: "q4", Overlay: &BaseModel{Repo: "a/b", Revision: "c"}, PackBinFrom: "x.bin"},
	}
	for _, o := range bad {
		out := filepath.Join(root, "out")
		if err := Write(root, out, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%+v created the pack directory", o)
		}
	}
}

// TestReadSnapshotWithoutIndex: every *.safetensors file is read.
func TestReadSnapshotWithoutIndex(t *testing.T) {
	dir := t.TempDir()
	shards := synthShards()
	for file, ts := range shards {
		writeSafetensors(t, filepath.Join(dir, file), ts)
	}
	snap, err := ReadSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Names) != 10 || !slices.IsSorted(snap.Names) {
		t.Fatalf("names %v", snap.Names)
	}
	q := snap.Tensors[nQ]
	whole := mustRead(t, filepath.Join(dir, shardA))
	if q.Shard != shardA || q.DType != "BF16" || !bytes.Equal(whole[q.Offset:q.Offset+int64(len(q.Data))], q.Data) {
		t.Fatalf("q_proj: %s %s offset %d", q.Shard, q.DType, q.Offset)
	}
	if len(snap.Shards) != 2 || snap.Shards[shardA].Size != int64(len(whole)) {
		t.Fatalf("shards %v", snap.Shards)
	}
}
