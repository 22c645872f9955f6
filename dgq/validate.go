package dgq

import (
	"encoding/hex"
	"fmt"
	"math/bits"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

// Validate checks every structural rule of a manifest against a blob of
// blobSize bytes (pass -1 when the blob's size is unknown) and returns all
// findings, in a stable order. It reads no tensor bytes.
func Validate(m *Manifest, blobSize int64) []Finding {
	v := validator{m: m, end: m.BlobSize}
	if blobSize >= 0 && blobSize < v.end {
		v.end = blobSize
	}
	v.findings = append(v.findings, m.decodeFindings...)
	v.header(blobSize)
	v.tensors()
	v.layout()
	return v.findings
}

type validator struct {
	m        *Manifest
	end      int64 // bytes actually addressable: min(blob_size, size of the blob file)
	findings []Finding
}

func (v *validator) add(tensor, kind, format string, args ...any) {
	v.findings = append(v.findings, Finding{Tensor: tensor, Kind: kind, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) header(blobSize int64) {
	m := v.m
	if m.FormatVersion < 1 || m.FormatVersion > MaxFormatVersion {
		v.add("", KindVersion, "format_version %d is not supported (this dgq reads 1..%d); upgrade dgq", m.FormatVersion, MaxFormatVersion)
	}
	if m.Blob == "" || m.Blob != filepath.Base(m.Blob) || m.Blob == "." || m.Blob == ".." || strings.ContainsAny(m.Blob, `/\`) {
		v.add("", KindManifest, "blob %q must be a plain file name inside the pack", m.Blob)
	}
	if _, err := layout.ParseProfile(m.Profile); err != nil {
		v.add("", KindManifest, "profile %q is unknown", m.Profile)
	}
	if m.BlobSize < 0 {
		v.add("", KindManifest, "blob_size %d is negative", m.BlobSize)
	}
	if blobSize >= 0 && m.BlobSize != blobSize {
		v.add("", KindBlob, "blob is %d bytes, manifest says %d", blobSize, m.BlobSize)
	}
	if m.ExpertSplit < 0 || m.ExpertSplit%layout.ExpertSplitAlign != 0 {
		v.add("", KindExpertSplit, "expert_split %d is not a non-negative multiple of %d", m.ExpertSplit, layout.ExpertSplitAlign)
	}
	if m.ExpertSplit > m.BlobSize {
		v.add("", KindExpertSplit, "expert_split %d is beyond blob_size %d", m.ExpertSplit, m.BlobSize)
	}
	if len(m.Tensors) > MaxTensors {
		v.add("", KindManifest, "%d tensors exceeds the limit of %d", len(m.Tensors), MaxTensors)
	}
	for _, f := range m.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == ManifestName || f.Name == m.Blob || strings.ContainsAny(f.Name, `/\`) || f.Name == ".." {
			v.add("", KindFile, "side file name %q must be a plain file name other than the manifest and blob", f.Name)
		}
		if !isHexDigest(f.Digest) {
			v.add("", KindFile, "side file %s has a malformed digest %q", f.Name, f.Digest)
		}
	}
}

func (v *validator) tensors() {
	m := v.m
	seen := make(map[string]bool, len(m.Tensors))
	nvfp4 := false
	for i := range m.Tensors {
		t := &m.Tensors[i]
		name := t.Name
		switch {
		case name == "":
			name = fmt.Sprintf("#%d", i)
			v.add(name, KindName, "tensor has an empty name")
		case len(name) > MaxNameBytes:
			v.add(name[:64]+"…", KindName, "name is %d bytes (limit %d)", len(name), MaxNameBytes)
		case seen[name]:
			v.add(name, KindName, "duplicate tensor name")
		}
		seen[t.Name] = true
		if t.Format == codecs.NVFP4 {
			nvfp4 = true
		}
		v.tensor(name, t)
	}
	if nvfp4 && m.FormatVersion < FormatVersionNVFP4 {
		v.add("", KindVersion, "nvfp4 tensors need format_version %d, manifest says %d", FormatVersionNVFP4, m.FormatVersion)
	}
}

func (v *validator) tensor(name string, t *Tensor) {
	if t.Offset < 0 || t.Size < 0 {
		v.add(name, KindBounds, "negative offset %d or size %d", t.Offset, t.Size)
	} else if end, carry := bits.Add64(uint64(t.Offset), uint64(t.Size), 0); carry != 0 || end > uint64(v.end) {
		v.add(name, KindBounds, "bytes [%d, %d+%d) extend past the blob end %d", t.Offset, t.Offset, t.Size, v.end)
	}
	if t.Offset%layout.TensorAlign != 0 {
		v.add(name, KindAlignment, "offset %d is not a multiple of %d", t.Offset, layout.TensorAlign)
	}
	if !isHexDigest(t.Digest) {
		v.add(name, KindDigest, "digest %q is not 64 hex digits", t.Digest)
	}
	if t.Source != nil {
		v.source(name, t.Source)
	}
	if !t.Format.Valid() || !t.DType.Valid() || t.Class == layout.ClassInvalid {
		return // already reported when decoding
	}
	class, _, err := layout.Classify(t.Name, len(t.Shape))
	switch {
	case err != nil:
		v.add(name, KindClass, "not a DiffusionGemma tensor name: %v", err)
	case class != t.Class:
		v.add(name, KindClass, "class %s, but the name is a %s tensor", t.Class, class)
	}
	if t.Class.Locked() && t.Format != codecs.Raw {
		v.add(name, KindClass, "class %s is locked to raw, found %s", t.Class, t.Format)
	}
	m, err := codecs.FlattenShape(t.Shape)
	if err != nil {
		v.add(name, KindShape, "shape %v: %v", t.Shape, err)
		return
	}
	if err := t.Format.CheckDims(t.Shape); err != nil {
		v.add(name, KindDims, "%v", err)
		return
	}
	if want, err := t.Format.EncodedSize(t.DType, m); err != nil {
		v.add(name, KindSize, "%v", err)
	} else if want != t.Size {
		v.add(name, KindSize, "size %d, but %s %s %v takes %d bytes", t.Size, t.Format, t.DType, t.Shape, want)
	}
}

func (v *validator) source(name string, s *Source) {
	switch s.Kind {
	case "local":
		if s.File != "" {
			v.add(name, KindSource, "local source names a file %q", s.File)
		}
	case "external":
		found := false
		for _, f := range v.m.ExternalFiles {
			found = found || f.ID == s.File
		}
		if !found {
			v.add(name, KindSource, "external source file %q is not in external_files", s.File)
		}
	default:
		v.add(name, KindSource, "source kind %q is neither local nor external", s.Kind)
	}
	if s.Offset < 0 {
		v.add(name, KindSource, "source offset %d is negative", s.Offset)
	}
}

// layout checks the relations between tensors: no overlaps, experts after
// expert_split and everything else before it, and one expert format.
func (v *validator) layout() {
	m := v.m
	idx := make([]int, 0, len(m.Tensors))
	for i, t := range m.Tensors {
		if t.Offset >= 0 && t.Size >= 0 && t.Offset <= m.BlobSize {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return m.Tensors[idx[a]].Offset < m.Tensors[idx[b]].Offset })
	var prevEnd int64
	prev := ""
	for _, i := range idx {
		t := m.Tensors[i]
		if prev != "" && t.Offset < prevEnd {
			v.add(t.Name, KindOverlap, "bytes [%d, %d) overlap %s, which ends at %d", t.Offset, t.Offset+t.Size, prev, prevEnd)
		}
		if end := t.Offset + t.Size; end >= prevEnd {
			prevEnd, prev = end, t.Name
		}
	}
	expertFormat := codecs.FormatInvalid
	for _, t := range m.Tensors {
		isExpert := t.Class == layout.Experts
		switch {
		case isExpert && t.Offset < m.ExpertSplit:
			v.add(t.Name, KindExpertSplit, "expert tensor at %d lies before expert_split %d", t.Offset, m.ExpertSplit)
		case !isExpert && t.Class != layout.ClassInvalid && t.Offset >= m.ExpertSplit && t.Size > 0:
			v.add(t.Name, KindExpertSplit, "%s tensor at %d lies in the expert tail (expert_split %d)", t.Class, t.Offset, m.ExpertSplit)
		}
		if isExpert && t.Format.Valid() {
			if expertFormat == codecs.FormatInvalid {
				expertFormat = t.Format
			} else if t.Format != expertFormat {
				v.add(t.Name, KindClass, "expert tensors must share one format: found %s and %s", expertFormat, t.Format)
			}
		}
	}
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
