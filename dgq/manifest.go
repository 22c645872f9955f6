package dgq

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

// Names of the files of a pack.
const (
	ManifestName = "model.dgq.json"
	BlobName     = "model.dgq.bin"
)

// Format versions. Version 2 is written whenever an nvfp4 tensor is present,
// so a reader that predates nvfp4 refuses the pack instead of misreading it.
const (
	FormatVersion      = 1
	FormatVersionNVFP4 = 2
	MaxFormatVersion   = FormatVersionNVFP4
)

// Bounds on what a manifest may claim; a manifest beyond them is refused
// before anything is allocated for it.
const (
	MaxManifestBytes = 256 << 20
	MaxTensors       = 1 << 20
	MaxNameBytes     = 1024
)

// Manifest is the JSON document that describes a pack.
type Manifest struct {
	FormatVersion int               `json:"format_version"`
	Generator     string            `json:"generator"`
	Profile       string            `json:"profile"`
	Overrides     []layout.Override `json:"overrides"`
	Source        *SourceInfo       `json:"source,omitempty"`
	Blob          string            `json:"blob"`
	BlobSize      int64             `json:"blob_size"`
	ExpertSplit   int64             `json:"expert_split"`
	// LocalExpertSplit is where the expert tail starts in a layered pack's
	// local blob, and LocalBlobSize that blob's size (both absent in
	// self-contained packs, whose blob is the canonical blob_size bytes).
	LocalExpertSplit *int64         `json:"local_expert_split,omitempty"`
	LocalBlobSize    *int64         `json:"local_blob_size,omitempty"`
	Tensors          []Tensor       `json:"tensors"`
	ExternalFiles    []ExternalFile `json:"external_files"`
	Files            []File         `json:"files"`

	// problems found while decoding (unknown enum values), reported by Validate.
	decodeFindings []Finding
}

// SourceInfo records where a pack was made from (informational).
type SourceInfo struct {
	Path     string `json:"path,omitempty"`
	Repo     string `json:"repo,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// Tensor is one manifest entry. Offset and Size address the canonical blob.
type Tensor struct {
	Name   string        `json:"name"`
	Class  layout.Class  `json:"class"`
	Format codecs.Format `json:"format"`
	DType  codecs.DType  `json:"dtype"`
	Shape  []int64       `json:"shape"`
	Offset int64         `json:"offset"`
	Size   int64         `json:"size"`
	// Digest is the hex BLAKE3-256 of the tensor's Size bytes.
	Digest string `json:"digest"`
	// Source is nil in a self-contained pack.
	Source *Source `json:"source"`

	// the manifest's text for class, format and dtype when it named no known
	// value, so a damaged manifest can still be shown as it is
	raw wireTensor
}

// MarshalJSON writes the entry; an unknown class, format or dtype read from a
// damaged manifest is written back as it was read.
func (t Tensor) MarshalJSON() ([]byte, error) {
	w := wireTensor{Name: t.Name, Shape: t.Shape, Offset: t.Offset, Size: t.Size, Digest: t.Digest, Source: t.Source,
		Class: t.raw.Class, Format: t.raw.Format, DType: t.raw.DType}
	if t.Class != layout.ClassInvalid || w.Class == "" {
		w.Class = t.Class.String()
	}
	if t.Format.Valid() || w.Format == "" {
		w.Format = t.Format.String()
	}
	if t.DType.Valid() || w.DType == "" {
		w.DType = t.DType.String()
	}
	return json.Marshal(w)
}

// Source says where a layered pack's entry takes its bytes from.
type Source struct {
	Kind   string `json:"kind"` // SourceLocal or SourceExternal
	File   string `json:"file,omitempty"`
	Offset int64  `json:"offset"`
}

// Source kinds and external file roles.
const (
	SourceLocal    = "local"
	SourceExternal = "external"
	RoleHF         = "hf_safetensors"
	RolePackBin    = "pack_bin"
)

// ExternalFile pins a file a layered pack references.
type ExternalFile struct {
	ID           string `json:"id"`
	Role         string `json:"role"`
	Repo         string `json:"repo,omitempty"`
	Revision     string `json:"revision,omitempty"`
	Path         string `json:"path"`
	Size         int64  `json:"size"`
	HeaderSHA256 string `json:"header_sha256,omitempty"`
}

// File is a side file copied from the source snapshot into the pack.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // hex BLAKE3-256
}

// StoredBlobSize is the size the pack's own blob file must have: the local
// blob size for a layered pack, blob_size otherwise.
func (m *Manifest) StoredBlobSize() int64 {
	if m.LocalBlobSize != nil {
		return *m.LocalBlobSize
	}
	return m.BlobSize
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

// wireTensor decodes class, format and dtype as strings so that one bad
// entry becomes a finding naming the tensor instead of failing the decode.
type wireTensor struct {
	Name   string  `json:"name"`
	Class  string  `json:"class"`
	Format string  `json:"format"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	Size   int64   `json:"size"`
	Digest string  `json:"digest"`
	Source *Source `json:"source"`
}

type wireManifest struct {
	Manifest
	Tensors []wireTensor `json:"tensors"`
}

// ParseManifest decodes a manifest. It fails only when the document is not a
// dgq manifest at all (size, syntax, unknown fields, too many tensors);
// entry-level problems are kept for Validate to report with the rest.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", ErrManifest, len(data), MaxManifestBytes)
	}
	// Count entries cheaply before decoding them into memory.
	if n := bytes.Count(data, []byte(`"name"`)); n > MaxTensors+1024 {
		return nil, fmt.Errorf("%w: %d entries exceeds the limit of %d tensors", ErrManifest, n, MaxTensors)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireManifest
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrManifest)
	}
	m := w.Manifest
	m.Tensors = make([]Tensor, len(w.Tensors))
	for i, wt := range w.Tensors {
		t := Tensor{Name: wt.Name, Shape: wt.Shape, Offset: wt.Offset, Size: wt.Size, Digest: wt.Digest, Source: wt.Source, raw: wt}
		if err := t.Class.UnmarshalText([]byte(wt.Class)); err != nil {
			m.decodeFindings = append(m.decodeFindings, Finding{Tensor: wt.Name, Kind: KindUnknownKind, Message: fmt.Sprintf("unknown class %q", wt.Class)})
		}
		if err := t.Format.UnmarshalText([]byte(wt.Format)); err != nil {
			m.decodeFindings = append(m.decodeFindings, Finding{Tensor: wt.Name, Kind: KindUnknownKind, Message: fmt.Sprintf("unknown format %q", wt.Format)})
		}
		if err := t.DType.UnmarshalText([]byte(wt.DType)); err != nil {
			m.decodeFindings = append(m.decodeFindings, Finding{Tensor: wt.Name, Kind: KindUnknownKind, Message: fmt.Sprintf("unknown dtype %q", wt.DType)})
		}
		m.Tensors[i] = t
	}
	return &m, nil
}

// Marshal encodes the manifest as indented JSON with a trailing newline.
// Entries with unknown enum values cannot be marshaled.
func (m *Manifest) Marshal() ([]byte, error) {
	out := *m
	if out.Overrides == nil {
		out.Overrides = []layout.Override{}
	}
	if out.ExternalFiles == nil {
		out.ExternalFiles = []ExternalFile{}
	}
	if out.Files == nil {
		out.Files = []File{}
	}
	if out.Tensors == nil {
		out.Tensors = []Tensor{}
	}
	b, err := json.MarshalIndent(&out, "", " ")
	if err != nil {
		return nil, fmt.Errorf("dgq: encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}
