package dgq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

// Names of the files of a pack.
const (
	ManifestName = "model.dgq.json"
	BlobName     = "model.dgq.bin"
)

// Manifest versions: the engine's 1–4 (docs/format.md §2) and dgq's own
// version for packs the engine cannot run.
const (
	VersionAffine  = 1    // q4_block/q6_block packs
	VersionNVFP4   = 2    // an nvfp4_block tensor is present
	VersionLayered = 3    // tensors have sources (overlay packs)
	VersionCustom  = 4    // custom_classes is not empty
	VersionDGQOnly = 1000 // dgq only: the engine's version gate (1–4) refuses it
)

// KnownVersion reports whether a reader of this dgq understands version v.
func KnownVersion(v int) bool {
	return (v >= VersionAffine && v <= VersionCustom) || v == VersionDGQOnly
}

// Bounds on what a manifest may claim; a manifest beyond them is refused
// before anything is allocated for it.
const (
	MaxManifestBytes = 256 << 20
	MaxTensors       = 1 << 20
	MaxNameBytes     = 1024
)

// Manifest is the JSON document that describes a pack: the engine's manifest
// (field names, order and spellings as mmastrac/diffgemma writes them) plus
// dgq's additions, which the engine ignores: a digest and a class per
// tensor and the "dgq" object.
type Manifest struct {
	Version     int    `json:"version"`
	Profile     string `json:"profile"` // the engine's profile name (q4, q5, q6, nvfp4, nvfp4_experts; bf16 in dgq-only packs)
	SourceModel string `json:"source_model"`
	Blob        string `json:"blob_file"`
	// ExpertSplit is the start of the expert tail (absent without experts,
	// and in packs of engines that predate it).
	ExpertSplit *int64 `json:"expert_split,omitempty"`
	// LocalExpertSplit is where the expert tail starts in a layered pack's
	// local blob.
	LocalExpertSplit *int64 `json:"local_expert_split,omitempty"`
	// BaseModel pins the Hugging Face snapshot of a layered pack's
	// hf_safetensors files.
	BaseModel     *BaseModel        `json:"base_model,omitempty"`
	ExternalFiles ExternalFiles     `json:"external_files,omitempty"`
	CustomClasses map[string]string `json:"custom_classes,omitempty"`
	Tensors       []Tensor          `json:"tensors"`
	// DGQ holds dgq's pack-level additions; nil in packs dgq did not write.
	DGQ *Extension `json:"dgq,omitempty"`

	// problems found while decoding (unknown enum values), reported by Validate.
	decodeFindings []Finding
}

// Extension is the manifest's "dgq" object.
type Extension struct {
	Generator string            `json:"generator"`
	Profile   string            `json:"profile"` // dgq's profile name (bf16, q4, q5, q6, nvfp4, nvfp4x)
	Overrides []layout.Override `json:"overrides"`
	// Encoder is how the quantized tensors were chosen (nil when unknown:
	// a pack repacked from one dgq did not write).
	Encoder *codecs.Method `json:"encoder,omitempty"`
	// Source records the Hugging Face snapshot the pack was made from, when
	// it was made from one.
	Source   *BaseModel `json:"source,omitempty"`
	BlobSize int64      `json:"blob_size"` // the canonical blob size
	// LocalBlobSize is the size of a layered pack's own (compact) blob.
	LocalBlobSize *int64 `json:"local_blob_size,omitempty"`
	Files         []File `json:"files"`
	// DGQOnly says why the engine cannot run the pack (version 1000); empty
	// when it can.
	DGQOnly string `json:"dgq_only,omitempty"`
	// Errors is the quantization error of each class against the source,
	// as quantize measured it (the classes of its --report); absent in
	// packs made before dgq recorded it and in packs it did not quantize.
	Errors []ClassReport `json:"errors,omitempty"`
	// Imatrix identifies the importance matrix the searching encoder
	// weighted its error with (quantize --imatrix); absent without one.
	Imatrix *ImatrixRef `json:"imatrix,omitempty"`
}

// BaseModel is a pinned Hugging Face repository revision.
type BaseModel struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
}

// Tensor is one manifest entry. Offset and Size address the canonical blob.
type Tensor struct {
	Name   string
	Format codecs.Format // the manifest's "kind"
	DType  codecs.DType
	Shape  []int64
	Offset int64
	Size   int64 // the manifest's "byte_len"
	// Source is nil in a self-contained pack.
	Source *Source
	// Digest is the hex BLAKE3-256 of the tensor's Size bytes ("" when the
	// pack carries none, e.g. one the engine wrote).
	Digest string
	// Class is the tensor's class as the manifest names it (ClassInvalid
	// when absent: Validate derives it from the name).
	Class layout.Class

	// the manifest's text for kind, dtype and class when it named no known
	// value, so a damaged manifest can still be shown as it is
	raw wireTensor
}

// wireTensor is an entry as JSON has it: enums as strings, so that one bad
// entry becomes a finding naming the tensor instead of failing the decode.
type wireTensor struct {
	Name   *string `json:"name"`
	Kind   *string `json:"kind"`
	DType  *string `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Offset *int64  `json:"offset"`
	Size   *int64  `json:"byte_len"`
	Source *Source `json:"source,omitempty"`
	Digest string  `json:"digest,omitempty"`
	Class  string  `json:"class,omitempty"`
}

// MarshalJSON writes the entry; an unknown kind, dtype or class read from a
// damaged manifest is written back as it was read.
func (t Tensor) MarshalJSON() ([]byte, error) {
	shape := t.Shape
	if shape == nil {
		shape = []int64{}
	}
	w := wireTensor{Name: &t.Name, Shape: shape, Offset: &t.Offset, Size: &t.Size, Source: t.Source, Digest: t.Digest,
		Kind: t.raw.Kind, DType: t.raw.DType, Class: t.raw.Class}
	if t.Format.Valid() || w.Kind == nil {
		k := t.Format.Kind()
		w.Kind = &k
	}
	if t.DType.Valid() || w.DType == nil {
		d := t.DType.String()
		w.DType = &d
	}
	if t.Class != layout.ClassInvalid {
		w.Class = t.Class.String()
	}
	return json.Marshal(w)
}

// Source says where a layered pack's entry takes its bytes from:
// {"kind":"local","local_offset":N} or {"kind":"external","file":KEY,"offset":N}.
type Source struct {
	Kind   string // SourceLocal or SourceExternal
	File   string // external_files key (external only)
	Offset int64  // local_offset, or the offset in the external file
}

// Source kinds and external file roles.
const (
	SourceLocal    = "local"
	SourceExternal = "external"
	RoleHF         = "hf_safetensors"
	RolePackBin    = "pack_bin"
)

type wireSource struct {
	Kind        string `json:"kind"`
	LocalOffset *int64 `json:"local_offset,omitempty"`
	File        string `json:"file,omitempty"`
	Offset      *int64 `json:"offset,omitempty"`
}

// MarshalJSON writes the engine's spelling of a source.
func (s Source) MarshalJSON() ([]byte, error) {
	w := wireSource{Kind: s.Kind}
	if s.Kind == SourceExternal {
		w.File, w.Offset = s.File, &s.Offset
	} else {
		w.LocalOffset = &s.Offset
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the engine's spelling of a source; an offset field of
// the other kind is kept as a malformed source for Validate to report.
func (s *Source) UnmarshalJSON(b []byte) error {
	var w wireSource
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Source{Kind: w.Kind, File: w.File, Offset: -1}
	switch {
	case w.Kind == SourceLocal && w.LocalOffset != nil && w.Offset == nil:
		s.Offset = *w.LocalOffset
	case w.Kind == SourceExternal && w.Offset != nil && w.LocalOffset == nil:
		s.Offset = *w.Offset
	}
	return nil
}

// ExternalFile pins a file a layered pack references.
type ExternalFile struct {
	ID           string `json:"-"` // the key in external_files
	Role         string `json:"role"`
	Path         string `json:"path"`
	Size         int64  `json:"expected_size"`
	HeaderSHA256 string `json:"header_sha256,omitempty"`
}

// ExternalFiles are a manifest's external files in key order (a JSON
// object keyed by id).
type ExternalFiles []ExternalFile

// MarshalJSON writes the object (keys sorted).
func (fs ExternalFiles) MarshalJSON() ([]byte, error) {
	m := make(map[string]ExternalFile, len(fs))
	for _, f := range fs {
		m[f.ID] = f
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the object into key order.
func (fs *ExternalFiles) UnmarshalJSON(b []byte) error {
	var m map[string]ExternalFile
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	out := make(ExternalFiles, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f := m[k]
		f.ID = k
		out = append(out, f)
	}
	*fs = out
	return nil
}

// File is a side file copied from the source snapshot into the pack.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // hex BLAKE3-256
}

// CanonicalSize is the size of the canonical blob: the end of the last
// tensor (the engine's blob ends there).
func (m *Manifest) CanonicalSize() int64 {
	var end int64
	for _, t := range m.Tensors {
		if t.Offset >= 0 && t.Size >= 0 && t.Offset <= (1<<63-1)-t.Size {
			end = max(end, t.Offset+t.Size)
		}
	}
	return end
}

// StoredBlobSize is the size the pack's own blob file must have: the local
// blob size for a layered pack, the canonical size otherwise.
func (m *Manifest) StoredBlobSize() int64 {
	if m.DGQ != nil && m.DGQ.LocalBlobSize != nil {
		return *m.DGQ.LocalBlobSize
	}
	if m.Layered() {
		return -1 // unknown: an engine-written layered pack does not record it
	}
	return m.CanonicalSize()
}

// EngineSideFiles are the files the engine copies from the source snapshot
// into a pack (when present); it records no list of them.
var EngineSideFiles = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}

// SideFiles are the side files the dgq object records (none in packs dgq
// did not write).
func (m *Manifest) SideFiles() []File {
	if m.DGQ == nil {
		return nil
	}
	return m.DGQ.Files
}

// Undigested counts the tensors that carry no digest.
func (m *Manifest) Undigested() int {
	n := 0
	for _, t := range m.Tensors {
		if t.Digest == "" {
			n++
		}
	}
	return n
}

// ExternalFile returns the external file with the given id.
func (m *Manifest) ExternalFile(id string) (*ExternalFile, bool) {
	for i := range m.ExternalFiles {
		if m.ExternalFiles[i].ID == id {
			return &m.ExternalFiles[i], true
		}
	}
	return nil, false
}

// Layered reports whether any entry has a source.
func (m *Manifest) Layered() bool {
	for i := range m.Tensors {
		if m.Tensors[i].Source != nil {
			return true
		}
	}
	return false
}

// Split is the expert split, or (0, false) when the manifest has none.
func (m *Manifest) Split() (int64, bool) {
	if m.ExpertSplit == nil {
		return 0, false
	}
	return *m.ExpertSplit, true
}

// DGQProfile is the profile in dgq's terms: the dgq object's, else the
// engine profile (nvfp4_experts reads as nvfp4x).
func (m *Manifest) DGQProfile() string {
	if m.DGQ != nil && m.DGQ.Profile != "" {
		return m.DGQ.Profile
	}
	switch m.Profile {
	case "nvfp4_experts":
		return string(layout.ProfileNVFP4X)
	case "q5": // the engine's q5 profile stores q4_block experts
		return string(layout.ProfileQ4)
	}
	return m.Profile
}

// RunsOn lists the runtimes that can load the pack: dgq and the engine
// ("diffgemma") for the engine's versions, dgq alone for a dgq-only pack
// (version 1000), none for a version neither knows (empty, not nil).
func (m *Manifest) RunsOn() []string {
	switch {
	case m.Version >= VersionAffine && m.Version <= VersionCustom:
		return []string{"dgq", "diffgemma"}
	case m.Version == VersionDGQOnly:
		return []string{"dgq"}
	}
	return []string{}
}

// ParseManifest decodes a manifest. It fails only when the document is not
// a .dgq manifest at all (size, syntax, a missing required key, a pack of
// dgq's earlier planar format, too many tensors); entry-level problems are
// kept for Validate to report with the rest. Unknown keys are ignored, as the
// engine ignores them.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", ErrManifest, len(data), MaxManifestBytes)
	}
	// Count entries cheaply before decoding them into memory.
	if n := bytes.Count(data, []byte(`"name"`)); n > MaxTensors+1024 {
		return nil, fmt.Errorf("%w: %d entries exceeds the limit of %d tensors", ErrManifest, n, MaxTensors)
	}
	// dgq's earlier format is named even when the rest does not decode.
	var legacy struct {
		FormatVersion *int `json:"format_version"`
	}
	if json.Unmarshal(data, &legacy) == nil && legacy.FormatVersion != nil {
		return nil, fmt.Errorf("%w: %w: a pack of dgq's earlier planar format (format_version %d), which no reader of the .dgq format accepts; quantize the source again", ErrManifest, ErrLegacyFormat, *legacy.FormatVersion)
	}
	var w wireManifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrManifest, jsonProblem(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrManifest)
	}
	if w.FormatVersion != nil {
		return nil, fmt.Errorf("%w: %w: a pack of dgq's earlier planar format (format_version %d), which no reader of the .dgq format accepts; quantize the source again", ErrManifest, ErrLegacyFormat, *w.FormatVersion)
	}
	if missing := w.missing(); missing != "" {
		return nil, fmt.Errorf("%w: required key %q is missing (not a .dgq manifest)", ErrManifest, missing)
	}
	m := &Manifest{Version: *w.Version, Profile: *w.Profile, SourceModel: *w.SourceModel, Blob: *w.Blob,
		ExpertSplit: w.ExpertSplit, LocalExpertSplit: w.LocalExpertSplit, BaseModel: w.BaseModel,
		ExternalFiles: w.ExternalFiles, CustomClasses: w.CustomClasses}
	if len(w.DGQ) > 0 && string(w.DGQ) != "null" {
		// dgq's own object: a damaged one is a finding, not an unreadable
		// manifest (the engine ignores it).
		var ext Extension
		if err := json.Unmarshal(w.DGQ, &ext); err != nil {
			m.decodeFindings = append(m.decodeFindings, Finding{Kind: KindManifest, Message: fmt.Sprintf("dgq object is malformed and ignored: %s", jsonProblem(err))})
		} else {
			m.DGQ = &ext
		}
	}
	m.Tensors = make([]Tensor, len(w.Tensors))
	for i, wt := range w.Tensors {
		t, err := m.decodeTensor(i, wt)
		if err != nil {
			return nil, err
		}
		m.Tensors[i] = t
	}
	return m, nil
}

type wireManifest struct {
	FormatVersion    *int              `json:"format_version"`
	Version          *int              `json:"version"`
	Profile          *string           `json:"profile"`
	SourceModel      *string           `json:"source_model"`
	Blob             *string           `json:"blob_file"`
	ExpertSplit      *int64            `json:"expert_split"`
	LocalExpertSplit *int64            `json:"local_expert_split"`
	BaseModel        *BaseModel        `json:"base_model"`
	ExternalFiles    ExternalFiles     `json:"external_files"`
	CustomClasses    map[string]string `json:"custom_classes"`
	Tensors          []wireTensor      `json:"tensors"`
	DGQ              json.RawMessage   `json:"dgq"`
}

// missing names the first required key that is absent.
func (w *wireManifest) missing() string {
	switch {
	case w.Version == nil:
		return "version"
	case w.Profile == nil:
		return "profile"
	case w.SourceModel == nil:
		return "source_model"
	case w.Blob == nil:
		return "blob_file"
	case w.Tensors == nil:
		return "tensors"
	}
	return ""
}

// decodeTensor turns a wire entry into a Tensor; a missing required key
// fails the decode (the engine could not read the manifest), an unknown enum
// value becomes a finding.
func (m *Manifest) decodeTensor(i int, wt wireTensor) (Tensor, error) {
	for key, present := range map[string]bool{"name": wt.Name != nil, "kind": wt.Kind != nil, "dtype": wt.DType != nil,
		"shape": wt.Shape != nil, "offset": wt.Offset != nil, "byte_len": wt.Size != nil} {
		if !present {
			return Tensor{}, fmt.Errorf("%w: tensor #%d has no %q", ErrManifest, i, key)
		}
	}
	t := Tensor{Name: *wt.Name, Shape: wt.Shape, Offset: *wt.Offset, Size: *wt.Size, Source: wt.Source, Digest: wt.Digest, raw: wt}
	finding := func(format string, args ...any) {
		m.decodeFindings = append(m.decodeFindings, Finding{Tensor: t.Name, Kind: KindUnknownKind, Message: fmt.Sprintf(format, args...)})
	}
	if f, err := codecs.ParseKind(*wt.Kind); err != nil {
		finding("unknown kind %q", *wt.Kind)
	} else {
		t.Format = f
	}
	if err := t.DType.UnmarshalText([]byte(*wt.DType)); err != nil {
		finding("unknown dtype %q", *wt.DType)
	}
	if wt.Class != "" {
		if err := t.Class.UnmarshalText([]byte(wt.Class)); err != nil {
			finding("unknown class %q", wt.Class)
		}
	} else if c, _, err := layout.Classify(t.Name, len(t.Shape)); err == nil {
		t.Class = c // the engine does not record classes: derive it from the name
	}
	return t, nil
}

// Marshal encodes the manifest as JSON indented by two spaces (the engine's
// pretty form) with a trailing newline. Entries with unknown enum values
// cannot be marshaled.
func (m *Manifest) Marshal() ([]byte, error) {
	out := *m
	if out.Tensors == nil {
		out.Tensors = []Tensor{}
	}
	if out.DGQ != nil {
		ext := *out.DGQ
		if ext.Overrides == nil {
			ext.Overrides = []layout.Override{}
		}
		if ext.Files == nil {
			ext.Files = []File{}
		}
		out.DGQ = &ext
	}
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dgq: encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// jsonProblem says what is wrong with a JSON document in the manifest's
// terms: a value of the wrong type names its key and what it should be
// ("key external_files holds an array, want an object"), not the Go type
// it was decoded into.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	want := "another type"
	switch te.Type.Kind() {
	case reflect.Map, reflect.Struct:
		want = "an object"
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a whole number"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.Pointer:
		want = "a value of another type"
	}
	if te.Field == "" {
		return fmt.Sprintf("the document is %s %s, want %s", article(te.Value), te.Value, want)
	}
	return fmt.Sprintf("key %s holds %s %s, want %s", te.Field, article(te.Value), te.Value, want)
}

// article is "an" before a vowel, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
