package enginepack

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Alignments of the blob layout.
const (
	TensorAlign      = 64    // every tensor's offset, canonical and local
	ExpertSplitAlign = 16384 // start of the expert region
)

// SideFiles are copied from the source directory into the pack when present.
var SideFiles = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}

// Options selects what Write produces.
type Options struct {
	// Profile is q4, q5, q6, nvfp4 or nvfp4_experts.
	Profile string
	// Overrides maps a class (ClassExpertsGateUp, ..., ClassSC) to a kind
	// ("q4_block" or the short "q4"), like the engine's `--set`. The caller
	// expands "experts" into both expert classes. A non-empty map is
	// recorded as custom_classes and makes the pack version 4.
	Overrides map[string]string
	// Overlay makes a layered pack as the engine's `quantize --overlay`
	// does: every raw tensor becomes an hf_safetensors reference into its
	// source shard (the source directory must be the snapshot Overlay
	// names), and only the other tensors are written to the pack's blob.
	Overlay *BaseModel
	// PackBinFrom makes a layered pack whose raw tensors are pack_bin
	// references into another, self-contained pack's blob: the path as the
	// manifest records it, relative to the new pack directory (for example
	// "../plain/model.dgq.bin") or absolute. That pack must hold every raw
	// tensor, raw and byte-identical. The engine's reader supports this role
	// but its writer has no command that makes it; this emulates one. It
	// cannot be combined with Overlay.
	PackBinFrom string
	// NoExpertSplit emulates an engine from before the expert split: the
	// first expert is not moved to a 16 KiB boundary and neither
	// expert_split nor local_expert_split is written. Experts still come
	// last and every offset is still 64-byte aligned.
	NoExpertSplit bool
	// ForceVersion, when non-zero, replaces the version the writer's rule
	// would choose.
	ForceVersion uint32
}

// Write quantizes the checkpoint in src into the pack directory out, as the
// engine's quantize_model does. Raw tensors of any dtype are copied as they
// are; quantized ones must be BF16, F16 or F32 (the engine assumes BF16).
// Nothing but the directory and side files exists if a tensor's kind does
// not suit its shape.
func Write(src, out string, opts Options) error {
	p, err := newPacker(src, out, opts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("enginepack: create pack directory: %w", err)
	}
	if err := copySideFiles(src, out); err != nil {
		return err
	}
	plan, err := planTensors(src, p)
	if err != nil {
		return err
	}
	if opts.PackBinFrom != "" {
		if p.ref, err = loadPackBin(out, opts.PackBinFrom); err != nil {
			return err
		}
	}
	if err := p.writeBlob(filepath.Join(out, BlobFile), plan); err != nil {
		return err
	}
	return p.writeManifest(src, out)
}

// planned is one tensor with its resolved kind, in blob order.
type planned struct {
	t    *Tensor
	kind string
}

// planTensors reads the snapshot, classifies and checks every tensor, and
// orders them: non-experts, then experts, each group by byte-wise name.
func planTensors(src string, p *packer) ([]planned, error) {
	snap, err := ReadSnapshot(src)
	if err != nil {
		return nil, err
	}
	p.snap = snap
	var head, tail []planned
	for _, name := range snap.Names {
		t := snap.Tensors[name]
		kind := ClassifyCustom(name, t.Shape, p.opts.Profile, p.overrides)
		if err := ValidateFormatDims(name, t.Shape, kind); err != nil {
			return nil, err
		}
		if IsExpert(name, t.Shape) {
			tail = append(tail, planned{t, kind})
		} else {
			head = append(head, planned{t, kind})
		}
	}
	return append(head, tail...), nil
}

// packer holds the two cursors of the layout: canonical, which every tensor
// advances, and local, the pack's own blob file, which only tensors written
// to it advance. They are equal in a self-contained pack.
type packer struct {
	opts       Options
	overrides  map[string]string
	layered    bool
	snap       *Snapshot
	ref        *packBinRef
	blob       *bufio.Writer
	canon      uint64
	local      uint64
	split      *uint64
	localSplit *uint64
	entries    []TensorEntry
	externals  map[string]ExternalFile
}

func newPacker(src, out string, opts Options) (*packer, error) {
	if _, err := ParseProfile(opts.Profile); err != nil {
		return nil, err
	}
	ov, err := ParseOverrides(opts.Overrides)
	if err != nil {
		return nil, err
	}
	if opts.Overlay != nil && opts.PackBinFrom != "" {
		return nil, fmt.Errorf("enginepack: Overlay and PackBinFrom cannot be combined")
	}
	return &packer{
		opts: opts, overrides: ov, externals: map[string]ExternalFile{},
		layered: opts.Overlay != nil || opts.PackBinFrom != "",
	}, nil
}

func (p *packer) writeBlob(path string, plan []planned) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("enginepack: create blob: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("enginepack: close blob: %w", cerr)
		}
	}()
	p.blob = bufio.NewWriter(f)
	for _, pl := range plan {
		if err := p.add(pl.t, pl.kind); err != nil {
			return err
		}
	}
	if err := p.blob.Flush(); err != nil {
		return fmt.Errorf("enginepack: write blob: %w", err)
	}
	return nil
}

// add places one tensor.
func (p *packer) add(t *Tensor, kind string) error {
	p.canon = alignUp(p.canon, TensorAlign)
	if p.split == nil && !p.opts.NoExpertSplit && IsExpert(t.Name, t.Shape) {
		if err := p.startExperts(); err != nil {
			return err
		}
	}
	e := TensorEntry{
		Name: t.Name, Kind: kind, DType: t.DType,
		Shape: append([]int64{}, t.Shape...), Offset: p.canon,
	}
	var err error
	if kind == KindRaw && p.layered {
		e.ByteLen, e.Source, err = p.external(t)
	} else {
		e.ByteLen, e.Source, err = p.writeLocal(t, kind)
	}
	if err != nil {
		return err
	}
	p.canon += e.ByteLen
	p.entries = append(p.entries, e)
	return nil
}

// startExperts moves both cursors to the next 16 KiB boundary, writing zero
// padding to the blob (in every mode, so a self-contained blob stays equal
// to the canonical layout).
func (p *packer) startExperts() error {
	p.canon = alignUp(p.canon, ExpertSplitAlign)
	split := p.canon
	p.split = &split
	if err := p.pad(alignUp(p.local, ExpertSplitAlign)); err != nil {
		return err
	}
	if p.layered {
		ls := p.local
		p.localSplit = &ls
	}
	return nil
}

// pad writes zeros to the blob until the local cursor reaches to.
func (p *packer) pad(to uint64) error {
	if _, err := p.blob.Write(make([]byte, to-p.local)); err != nil {
		return fmt.Errorf("enginepack: write blob padding: %w", err)
	}
	p.local = to
	return nil
}

// writeLocal encodes a tensor into the pack's own blob.
func (p *packer) writeLocal(t *Tensor, kind string) (uint64, *Source, error) {
	start := alignUp(p.local, TensorAlign)
	if err := p.pad(start); err != nil {
		return 0, nil, err
	}
	data := t.Data
	if kind != KindRaw {
		var err error
		if data, err = EncodeTensor(kind, t.DType, t.Data, t.Shape); err != nil {
			return 0, nil, fmt.Errorf("enginepack: tensor %s: %w", t.Name, err)
		}
	}
	if _, err := p.blob.Write(data); err != nil {
		return 0, nil, fmt.Errorf("enginepack: write tensor %s: %w", t.Name, err)
	}
	p.local += uint64(len(data))
	if !p.layered {
		return uint64(len(data)), nil, nil
	}
	return uint64(len(data)), &Source{Kind: "local", LocalOffset: start}, nil
}

// external records a raw tensor of a layered pack as a reference.
func (p *packer) external(t *Tensor) (uint64, *Source, error) {
	n := uint64(len(t.Data))
	if p.ref != nil {
		off, err := p.ref.locate(t)
		if err != nil {
			return 0, nil, err
		}
		key := p.opts.PackBinFrom
		p.externals[key] = ExternalFile{Role: RolePackBin, Path: key, ExpectedSize: p.ref.size}
		return n, &Source{Kind: "external", File: key, Offset: off}, nil
	}
	sh := p.snap.Shards[t.Shard]
	p.externals[t.Shard] = ExternalFile{
		Role: RoleHFSafetensors, Path: t.Shard, ExpectedSize: uint64(sh.Size), HeaderSHA256: sh.HeaderSHA256,
	}
	return n, &Source{Kind: "external", File: t.Shard, Offset: uint64(t.Offset)}, nil
}

func (p *packer) writeManifest(src, out string) error {
	m := &Manifest{
		Version: p.version(), Profile: p.opts.Profile, SourceModel: src, BlobFile: BlobFile,
		ExpertSplit: p.split, LocalExpertSplit: p.localSplit, BaseModel: p.opts.Overlay,
		ExternalFiles: p.externals, CustomClasses: p.overrides, Tensors: p.entries,
	}
	if m.Tensors == nil {
		m.Tensors = []TensorEntry{}
	}
	if err := os.WriteFile(filepath.Join(out, ManifestFile), MarshalManifest(m), 0o644); err != nil {
		return fmt.Errorf("enginepack: write manifest: %w", err)
	}
	return nil
}

func (p *packer) version() uint32 {
	if p.opts.ForceVersion != 0 {
		return p.opts.ForceVersion
	}
	nv := slices.ContainsFunc(p.entries, func(e TensorEntry) bool { return e.Kind == KindNVFP4 })
	return Version(p.opts.Profile, len(p.overrides) > 0, p.layered, nv)
}

func alignUp(v, a uint64) uint64 {
	return (v + a - 1) &^ (a - 1)
}

// copySideFiles copies each side file that exists as a regular file (after
// following links) in src.
func copySideFiles(src, out string) error {
	for _, name := range SideFiles {
		st, err := os.Stat(filepath.Join(src, name))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(out, name)); err != nil {
			return fmt.Errorf("enginepack: copy side file %s: %w", name, err)
		}
	}
	return nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(to)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := o.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(o, in)
	return err
}
