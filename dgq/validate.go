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

// Validate checks every structural rule of a manifest against the pack's
// own blob file of blobSize bytes (pass -1 when its size is unknown) and
// returns all findings, in a stable order. It reads no tensor bytes and
// resolves no external files (the overlay package checks those).
func Validate(m *Manifest, blobSize int64) []Finding {
	v := validator{m: m, end: m.BlobSize, layered: m.Layered() || m.LocalBlobSize != nil}
	if !v.layered && blobSize >= 0 && blobSize < v.end {
		v.end = blobSize
	}
	v.local = m.StoredBlobSize()
	if blobSize >= 0 && blobSize < v.local {
		v.local = blobSize
	}
	v.findings = append(v.findings, m.decodeFindings...)
	v.header(blobSize)
	v.tensors()
	v.layout()
	if v.layered {
		v.layeredRules()
	}
	return v.findings
}

type validator struct {
	m        *Manifest
	end      int64 // canonical bytes addressable: blob_size, or less when a self-contained blob file is short
	local    int64 // bytes of the pack's own blob file that sources may address
	layered  bool
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
	if blobSize >= 0 && m.StoredBlobSize() != blobSize {
		v.add("", KindBlob, "blob is %d bytes, manifest says %d", blobSize, m.StoredBlobSize())
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

// layeredRules checks what only a layered pack has: every entry has a
// source, sources lie inside the local blob or a pinned external file, only
// raw tensors come from external files, and the local expert tail mirrors the
// canonical one so it can be mapped without a copy.
func (v *validator) layeredRules() {
	m := v.m
	if m.LocalBlobSize == nil || *m.LocalBlobSize < 0 {
		v.add("", KindManifest, "layered pack without a valid local_blob_size")
	}
	split := int64(-1)
	if m.LocalExpertSplit == nil || *m.LocalExpertSplit < 0 || *m.LocalExpertSplit%layout.ExpertSplitAlign != 0 {
		v.add("", KindExpertSplit, "layered pack needs local_expert_split, a non-negative multiple of %d", layout.ExpertSplitAlign)
	} else {
		split = *m.LocalExpertSplit
	}
	ids := map[string]bool{}
	for _, f := range m.ExternalFiles {
		switch {
		case f.ID == "" || ids[f.ID]:
			v.add("", KindSource, "external file id %q is empty or repeated", f.ID)
		case f.Role != RoleHF && f.Role != RolePackBin:
			v.add("", KindSource, "external file %s has unknown role %q", f.ID, f.Role)
		case !cleanRelPath(f.Path):
			v.add("", KindSource, "external file %s path %q must be relative, without .. or backslashes", f.ID, f.Path)
		case f.Size < 0:
			v.add("", KindSource, "external file %s has negative size", f.ID)
		case f.Role == RoleHF && (f.Repo == "" || f.Revision == "" || !isHexDigest(f.HeaderSHA256)):
			v.add("", KindSource, "external file %s needs repo, revision and a 64-hex header_sha256", f.ID)
		}
		ids[f.ID] = true
	}
	for _, t := range m.Tensors {
		s := t.Source
		if s == nil {
			v.add(t.Name, KindSource, "layered pack entry has no source")
			continue
		}
		if s.Offset < 0 {
			v.add(t.Name, KindSource, "source offset %d is negative", s.Offset)
			continue
		}
		end, carry := bits.Add64(uint64(s.Offset), uint64(max(t.Size, 0)), 0)
		switch s.Kind {
		case SourceLocal:
			if s.File != "" {
				v.add(t.Name, KindSource, "local source names a file %q", s.File)
			}
			if s.Offset%layout.TensorAlign != 0 {
				v.add(t.Name, KindAlignment, "local offset %d is not a multiple of %d", s.Offset, layout.TensorAlign)
			}
			if carry != 0 || end > uint64(v.local) {
				v.add(t.Name, KindBounds, "local bytes [%d, +%d) extend past the local blob end %d", s.Offset, t.Size, v.local)
			}
			if t.Class == layout.Experts && split >= 0 && s.Offset-split != t.Offset-m.ExpertSplit {
				v.add(t.Name, KindExpertSplit, "local offset %d does not mirror the canonical tail (want %d)", s.Offset, split+t.Offset-m.ExpertSplit)
			}
		case SourceExternal:
			f, ok := m.ExternalFile(s.File)
			switch {
			case !ok:
				v.add(t.Name, KindSource, "external source file %q is not in external_files", s.File)
			case t.Format != codecs.Raw:
				v.add(t.Name, KindSource, "%s tensor cannot come from an external file (only raw bytes are verbatim)", t.Format)
			case carry != 0 || end > uint64(f.Size):
				v.add(t.Name, KindBounds, "bytes [%d, +%d) extend past the end of external file %s (%d bytes)", s.Offset, t.Size, f.ID, f.Size)
			}
		default:
			v.add(t.Name, KindSource, "source kind %q is neither local nor external", s.Kind)
		}
	}
}

func cleanRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || filepath.IsAbs(p) {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}
