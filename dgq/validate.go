package dgq

import (
	"encoding/hex"
	"fmt"
	"math/bits"
	"path/filepath"
	"slices"
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
	v := validator{m: m, end: m.CanonicalSize(), layered: m.Layered()}
	v.bound = v.end
	if !v.layered && blobSize >= 0 && blobSize < v.bound {
		v.bound = blobSize // a short blob: tensors past its end are out of bounds
	}
	v.local = m.StoredBlobSize()
	if v.local < 0 || (blobSize >= 0 && blobSize < v.local) {
		v.local = blobSize
	}
	v.localKnown = v.local >= 0
	if !v.localKnown {
		v.local = 1<<63 - 1
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
	m          *Manifest
	end        int64 // canonical size: the end of the last tensor
	bound      int64 // canonical bytes addressable: end, or less when a self-contained blob file is short
	local      int64 // bytes of the pack's own blob file that sources may address
	localKnown bool  // whether local is the blob file's size (or the recorded one)
	layered    bool
	findings   []Finding
}

func (v *validator) add(tensor, kind, format string, args ...any) {
	v.findings = append(v.findings, Finding{Tensor: tensor, Kind: kind, Message: fmt.Sprintf(format, args...)})
}

// engineProfiles are the profile names the engine's manifest accepts.
var engineProfiles = map[string]bool{"q4": true, "q5": true, "q6": true, "nvfp4": true, "nvfp4_experts": true}

func (v *validator) header(blobSize int64) {
	m := v.m
	if !KnownVersion(m.Version) {
		v.add("", KindVersion, "version %d is not one this dgq reads (1..4, and %d for dgq-only packs); upgrade dgq", m.Version, VersionDGQOnly)
	}
	if m.Blob == "" || m.Blob != filepath.Base(m.Blob) || m.Blob == "." || m.Blob == ".." || strings.ContainsAny(m.Blob, `/\`) || m.Blob == ManifestName {
		v.add("", KindManifest, "blob_file %q must be a plain file name inside the pack", m.Blob)
	}
	if !engineProfiles[m.Profile] && !(m.Version == VersionDGQOnly && m.Profile == string(layout.ProfileBF16)) {
		v.add("", KindManifest, "profile %q is unknown (the engine knows q4, q5, q6, nvfp4, nvfp4_experts)", m.Profile)
	}
	if !v.layered && blobSize >= 0 && blobSize != v.end {
		v.add("", KindBlob, "blob is %d bytes, the tensors end at %d", blobSize, v.end)
	}
	if m.DGQ != nil {
		v.extension(blobSize)
	}
	if split, ok := m.Split(); ok {
		if split < 0 || split%layout.ExpertSplitAlign != 0 {
			v.add("", KindExpertSplit, "expert_split %d is not a non-negative multiple of %d", split, layout.ExpertSplitAlign)
		}
		if split > v.end {
			v.add("", KindExpertSplit, "expert_split %d is beyond the end of the tensors %d", split, v.end)
		}
	}
	if len(m.Tensors) > MaxTensors {
		v.add("", KindManifest, "%d tensors exceeds the limit of %d", len(m.Tensors), MaxTensors)
	}
	for class, kind := range m.CustomClasses {
		if _, err := codecs.ParseKind(kind); err != nil || !slices.Contains(layout.Targets(), class) || class == layout.TargetExperts {
			v.add("", KindManifest, "custom_classes %q: %q is not a class and kind of the engine", class, kind)
		}
	}
}

// extension checks the "dgq" object.
func (v *validator) extension(blobSize int64) {
	ext := v.m.DGQ
	if ext.BlobSize != v.end {
		v.add("", KindManifest, "dgq.blob_size %d differs from the end of the tensors %d", ext.BlobSize, v.end)
	}
	if ext.LocalBlobSize != nil && blobSize >= 0 && *ext.LocalBlobSize != blobSize {
		v.add("", KindBlob, "local blob is %d bytes, manifest says %d", blobSize, *ext.LocalBlobSize)
	}
	if ext.LocalBlobSize != nil && !v.layered {
		v.add("", KindManifest, "dgq.local_blob_size in a pack without sources")
	}
	if (ext.DGQOnly != "") != (v.m.Version == VersionDGQOnly) {
		v.add("", KindVersion, "version %d but dgq.dgq_only is %q (a dgq-only pack has version %d and says why)", v.m.Version, ext.DGQOnly, VersionDGQOnly)
	}
	for _, f := range ext.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == ManifestName || f.Name == v.m.Blob || strings.ContainsAny(f.Name, `/\`) || f.Name == ".." {
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
	var nvfp4, dgqOnly string
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
		if t.Format == codecs.NVFP4 && nvfp4 == "" {
			nvfp4 = name
		}
		if c := v.tensor(name, t); c.Valid() && t.Format.Valid() && !layout.EngineRuns(c, t.Format, len(t.Shape)) && dgqOnly == "" {
			dgqOnly = fmt.Sprintf("%s (class %s) is %s, which the engine has no kernel for", name, c, t.Format.Kind())
		}
	}
	if m.Version == VersionDGQOnly || !KnownVersion(m.Version) {
		return
	}
	// The engine's version gate: what a reader of an older version must refuse.
	if nvfp4 != "" && m.Version < VersionNVFP4 {
		v.add(nvfp4, KindVersion, "nvfp4_block tensors need version >= %d, manifest says %d", VersionNVFP4, m.Version)
	}
	if v.layered && m.Version < VersionLayered {
		v.add("", KindVersion, "a layered pack needs version >= %d, manifest says %d", VersionLayered, m.Version)
	}
	// The engine's repack --overlay writes custom classes under version 3;
	// every other writer of custom_classes uses 4.
	if len(m.CustomClasses) > 0 && m.Version < VersionCustom && !(v.layered && m.Version == VersionLayered) {
		v.add("", KindVersion, "custom_classes need version %d, manifest says %d", VersionCustom, m.Version)
	}
	if dgqOnly != "" {
		v.add("", KindVersion, "version %d promises the engine can run the pack, but %s (dgq-only packs have version %d)", m.Version, dgqOnly, VersionDGQOnly)
	}
}

// tensor checks one entry and returns its class (from its name).
func (v *validator) tensor(name string, t *Tensor) layout.Class {
	if t.Offset < 0 || t.Size < 0 {
		v.add(name, KindBounds, "negative offset %d or size %d", t.Offset, t.Size)
	} else if end, carry := bits.Add64(uint64(t.Offset), uint64(t.Size), 0); carry != 0 || end > uint64(v.bound) {
		v.add(name, KindBounds, "bytes [%d, %d+%d) extend past the blob end %d", t.Offset, t.Offset, t.Size, v.bound)
	}
	if t.Offset%layout.TensorAlign != 0 {
		v.add(name, KindAlignment, "offset %d is not a multiple of %d", t.Offset, layout.TensorAlign)
	}
	if t.Digest != "" && !isHexDigest(t.Digest) {
		v.add(name, KindDigest, "digest %q is not 64 hex digits", t.Digest)
	}
	if !t.Format.Valid() || !t.DType.Valid() || (t.Class == layout.ClassInvalid && t.raw.Class != "") {
		return layout.ClassInvalid // already reported when decoding
	}
	class, _, err := layout.Classify(t.Name, len(t.Shape))
	switch {
	case err != nil:
		v.add(name, KindClass, "not a DiffusionGemma tensor name: %v", err)
	case t.Class != layout.ClassInvalid && class != t.Class:
		v.add(name, KindClass, "class %s, but the name is a %s tensor", t.Class, class)
	}
	if class.Locked() && t.Format != codecs.Raw {
		v.add(name, KindClass, "class %s is locked to raw, found %s", class, t.Format.Kind())
	}
	m, err := codecs.FlattenShape(t.Shape)
	if err != nil {
		v.add(name, KindShape, "shape %v: %v", t.Shape, err)
		return class
	}
	if err := t.Format.CheckDims(t.Shape); err != nil {
		v.add(name, KindDims, "%v", err)
		return class
	}
	if want, err := t.Format.EncodedSize(t.DType, m); err != nil {
		v.add(name, KindSize, "%v", err)
	} else if want != t.Size {
		v.add(name, KindSize, "byte_len %d, but %s %s %v takes %d bytes", t.Size, t.Format.Kind(), t.DType, t.Shape, want)
	}
	return class
}

// layout checks the relations between tensors: no overlaps, experts after
// expert_split and everything else before it, and one format per expert
// stack (the same for both stacks unless the pack is dgq-only).
func (v *validator) layout() {
	m := v.m
	idx := make([]int, 0, len(m.Tensors))
	for i, t := range m.Tensors {
		if t.Offset >= 0 && t.Size >= 0 && t.Offset <= v.end {
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
	// The first expert tensor of each role (gate_up, down) and its format.
	var roleFirst [2]*Tensor
	split, hasSplit := m.Split()
	if hasSplit && !slices.ContainsFunc(m.Tensors, func(t Tensor) bool { return t.Class == layout.Experts }) {
		v.add("", KindExpertSplit, "expert_split %d without expert tensors (writers omit it then)", split)
	}
	for _, t := range m.Tensors {
		isExpert := t.Class == layout.Experts
		switch {
		case !hasSplit:
		case isExpert && t.Offset < split:
			v.add(t.Name, KindExpertSplit, "expert tensor at %d lies before expert_split %d", t.Offset, split)
		case !isExpert && t.Class != layout.ClassInvalid && t.Size > 0 && t.Offset >= 0 && t.Offset < (1<<63-1)-t.Size && t.Offset+t.Size > split:
			v.add(t.Name, KindExpertSplit, "%s tensor [%d, %d) reaches into the expert tail (expert_split %d)", t.Class, t.Offset, t.Offset+t.Size, split)
		}
		if isExpert && t.Format.Valid() {
			i := 0
			if _, r, err := layout.Classify(t.Name, len(t.Shape)); err == nil && r == layout.RoleDown {
				i = 1
			}
			switch first := roleFirst[i]; {
			case first == nil:
				roleFirst[i] = &t
			case t.Format != first.Format:
				v.add(t.Name, KindClass, "expert tensors of one stack must share one format: found %s (%s) and %s", first.Format.Kind(), first.Name, t.Format.Kind())
			}
		}
	}
	if gu, dn := roleFirst[0], roleFirst[1]; gu != nil && dn != nil && gu.Format != dn.Format && m.Version != VersionDGQOnly {
		v.add(dn.Name, KindVersion, "the expert stacks differ (%s is %s, %s is %s): only a dgq-only pack (version %d) may store them in two kinds, the engine runs both in one",
			gu.Name, gu.Format.Kind(), dn.Name, dn.Format.Kind(), VersionDGQOnly)
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
	lsplit := int64(-1)
	split, hasSplit := m.Split()
	if m.LocalExpertSplit != nil {
		if *m.LocalExpertSplit < 0 || *m.LocalExpertSplit%layout.ExpertSplitAlign != 0 {
			v.add("", KindExpertSplit, "local_expert_split %d is not a non-negative multiple of %d", *m.LocalExpertSplit, layout.ExpertSplitAlign)
		} else if hasSplit {
			lsplit = *m.LocalExpertSplit
		}
	}
	hf := false
	for _, f := range m.ExternalFiles {
		switch {
		case f.ID == "":
			v.add("", KindSource, "external file with an empty key")
		case f.Role != RoleHF && f.Role != RolePackBin:
			v.add("", KindSource, "external file %s has unknown role %q", f.ID, f.Role)
		case f.Size < 0:
			v.add("", KindSource, "external file %s has negative expected_size", f.ID)
		case f.Role == RoleHF && (!cleanRelPath(f.Path) || !isHexDigest(f.HeaderSHA256)):
			v.add("", KindSource, "external file %s needs a relative path inside the snapshot and a 64-hex header_sha256", f.ID)
		case f.Role == RolePackBin && f.Path == "":
			v.add("", KindSource, "external file %s has an empty path", f.ID)
		}
		hf = hf || f.Role == RoleHF
	}
	if hf && (m.BaseModel == nil || m.BaseModel.Repo == "" || m.BaseModel.Revision == "") {
		v.add("", KindSource, "hf_safetensors files need base_model with repo and revision")
	}
	if lsplit >= 0 && v.localKnown && v.local-lsplit != v.end-split {
		v.add("", KindExpertSplit, "the local blob holds %d bytes from local_expert_split %d, the canonical tail is %d bytes (the engine maps the tail only when they are equal)", v.local-lsplit, lsplit, v.end-split)
	}
	var local []region
	for _, t := range m.Tensors {
		s := t.Source
		if s == nil {
			// bytes at their canonical offset in the pack's own (local) blob
			if end, carry := bits.Add64(uint64(max(t.Offset, 0)), uint64(max(t.Size, 0)), 0); carry != 0 || end > uint64(v.local) {
				v.add(t.Name, KindBounds, "entry without a source: bytes [%d, +%d) extend past the local blob end %d", t.Offset, t.Size, v.local)
			} else if t.Size > 0 {
				local = append(local, region{t.Offset, int64(end)})
			}
			continue
		}
		if s.Offset < 0 {
			v.add(t.Name, KindSource, "source %q has no valid offset", s.Kind)
			continue
		}
		end, carry := bits.Add64(uint64(s.Offset), uint64(max(t.Size, 0)), 0)
		switch s.Kind {
		case SourceLocal:
			if s.Offset%layout.TensorAlign != 0 {
				v.add(t.Name, KindAlignment, "local offset %d is not a multiple of %d", s.Offset, layout.TensorAlign)
			}
			if carry != 0 || end > uint64(v.local) {
				v.add(t.Name, KindBounds, "local bytes [%d, +%d) extend past the local blob end %d", s.Offset, t.Size, v.local)
			} else if t.Size > 0 {
				local = append(local, region{s.Offset, int64(end)})
			}
			if t.Class == layout.Experts && lsplit >= 0 && s.Offset-lsplit != t.Offset-split {
				v.add(t.Name, KindExpertSplit, "local offset %d does not mirror the canonical tail (want %d)", s.Offset, lsplit+t.Offset-split)
			}
		case SourceExternal:
			f, ok := m.ExternalFile(s.File)
			switch {
			case !ok:
				v.add(t.Name, KindSource, "external source file %q is not in external_files", s.File)
			case t.Format != codecs.Raw:
				v.add(t.Name, KindSource, "%s tensor cannot come from an external file (only raw bytes are verbatim)", t.Format.Kind())
			case carry != 0 || end > uint64(f.Size):
				v.add(t.Name, KindBounds, "bytes [%d, +%d) extend past the end of external file %s (%d bytes)", s.Offset, t.Size, f.ID, f.Size)
			}
		default:
			v.add(t.Name, KindSource, "source kind %q is neither local nor external", s.Kind)
		}
	}
	sort.Slice(local, func(a, b int) bool { return local[a].start < local[b].start })
	for i := 1; i < len(local); i++ {
		if local[i].start < local[i-1].end {
			v.add("", KindOverlap, "local blob bytes [%d, %d) are used by two tensors", local[i].start, min(local[i].end, local[i-1].end))
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
