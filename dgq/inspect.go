package dgq

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/dgq-dev/dgq/layout"
)

// PackInfo is what `dgq inspect` shows: the manifest's facts plus a per-class
// summary and the structural findings (no digests are checked). Its JSON
// keys are a contract (docs/cli.md).
type PackInfo struct {
	FormatVersion    int                   `json:"format_version"` // the manifest's version
	Generator        string                `json:"generator"`      // "" for packs dgq did not write
	Profile          string                `json:"profile"`        // dgq's name (nvfp4_experts reads as nvfp4x)
	ManifestProfile  string                `json:"manifest_profile"`
	Encoder          string                `json:"encoder,omitempty"`
	Overrides        []layout.Override     `json:"overrides"`
	CustomClasses    map[string]string     `json:"custom_classes"`
	RunsOn           []string              `json:"runs_on"`
	DGQOnly          string                `json:"dgq_only,omitempty"`
	Layered          bool                  `json:"layered"`
	Blob             string                `json:"blob"`
	BlobSize         int64                 `json:"blob_size"`
	ExpertSplit      *int64                `json:"expert_split"`
	LocalExpertSplit *int64                `json:"local_expert_split,omitempty"`
	LocalBlobSize    *int64                `json:"local_blob_size,omitempty"`
	SourceModel      string                `json:"source_model"`
	BaseModel        *BaseModel            `json:"base_model,omitempty"`
	Tensors          []TensorInfo          `json:"tensors"`
	ExternalFiles    []ExternalFileInfo    `json:"external_files"`
	Files            []File                `json:"files"`
	Summary          []layout.ClassSummary `json:"summary"`
	Findings         []Finding             `json:"findings"`
}

// TensorInfo is one tensor as inspect shows it.
type TensorInfo struct {
	Name   string      `json:"name"`
	Class  string      `json:"class"`
	Format string      `json:"format"` // the kind: q4_block, ...
	DType  string      `json:"dtype"`
	Shape  []int64     `json:"shape"`
	Offset int64       `json:"offset"`
	Size   int64       `json:"size"` // byte_len
	Digest *string     `json:"digest"`
	Source *SourceInfo `json:"source"`
}

// SourceInfo is a layered entry's source as inspect shows it.
type SourceInfo struct {
	Kind   string `json:"kind"`
	File   string `json:"file,omitempty"`
	Offset int64  `json:"offset"`
}

// ExternalFileInfo is an external file as inspect shows it.
type ExternalFileInfo struct {
	ID           string `json:"id"`
	Role         string `json:"role"`
	Repo         string `json:"repo,omitempty"`
	Revision     string `json:"revision,omitempty"`
	Path         string `json:"path"`
	Size         int64  `json:"size"`
	HeaderSHA256 string `json:"header_sha256,omitempty"`
}

// Inspect reads the pack's manifest and describes it. It fails only when the
// manifest cannot be read; rule violations are listed in Findings.
func Inspect(dir string) (*PackInfo, error) {
	dir, err := ResolvePack(dir)
	if err != nil {
		return nil, err
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	blobSize := int64(-1)
	var blobFinding []Finding
	if st, err := statBlob(dir, m); err == nil { // the local blob, for a layered pack
		blobSize = st
	} else if errors.Is(err, fs.ErrNotExist) {
		blobFinding = []Finding{{Kind: KindBlob, Message: fmt.Sprintf("blob %s is missing", filepath.Base(m.Blob))}}
	} else {
		blobFinding = []Finding{{Kind: KindBlob, Message: fmt.Sprintf("blob %s cannot be read: %v", filepath.Base(m.Blob), err)}}
	}
	findings := append(append([]Finding{}, blobFinding...), Validate(m, blobSize)...)
	info := &PackInfo{
		FormatVersion: m.Version, Profile: m.DGQProfile(), ManifestProfile: m.Profile, CustomClasses: m.CustomClasses,
		RunsOn: m.RunsOn(), Layered: m.Layered(), Blob: m.Blob, BlobSize: m.CanonicalSize(), ExpertSplit: m.ExpertSplit,
		LocalExpertSplit: m.LocalExpertSplit, SourceModel: m.SourceModel, BaseModel: m.BaseModel,
		Overrides: []layout.Override{}, Files: []File{}, Summary: summarize(m), Findings: findings,
	}
	if info.CustomClasses == nil {
		info.CustomClasses = map[string]string{}
	}
	if ext := m.DGQ; ext != nil {
		info.Generator, info.DGQOnly, info.LocalBlobSize = ext.Generator, ext.DGQOnly, ext.LocalBlobSize
		if ext.Encoder != nil {
			info.Encoder = ext.Encoder.String()
		}
		info.Overrides = append(info.Overrides, ext.Overrides...)
		info.Files = append(info.Files, ext.Files...)
	}
	info.Tensors = make([]TensorInfo, len(m.Tensors))
	for i, t := range m.Tensors {
		info.Tensors[i] = tensorInfo(t)
	}
	info.ExternalFiles = make([]ExternalFileInfo, len(m.ExternalFiles))
	for i, f := range m.ExternalFiles {
		e := ExternalFileInfo{ID: f.ID, Role: f.Role, Path: f.Path, Size: f.Size, HeaderSHA256: f.HeaderSHA256}
		if f.Role == RoleHF && m.BaseModel != nil {
			e.Repo, e.Revision = m.BaseModel.Repo, m.BaseModel.Revision
		}
		info.ExternalFiles[i] = e
	}
	return info, nil
}

func tensorInfo(t Tensor) TensorInfo {
	ti := TensorInfo{Name: t.Name, Class: t.Class.String(), Format: t.Format.Kind(), DType: t.DType.String(),
		Shape: t.Shape, Offset: t.Offset, Size: t.Size}
	if !t.Format.Valid() && t.raw.Kind != nil {
		ti.Format = *t.raw.Kind
	}
	if !t.DType.Valid() && t.raw.DType != nil {
		ti.DType = *t.raw.DType
	}
	if t.Digest != "" {
		d := t.Digest
		ti.Digest = &d
	}
	if s := t.Source; s != nil {
		ti.Source = &SourceInfo{Kind: s.Kind, File: s.File, Offset: s.Offset}
	}
	if ti.Shape == nil {
		ti.Shape = []int64{}
	}
	return ti
}

// summarize builds the per-class table of a manifest through the same code
// that summarizes a plan.
func summarize(m *Manifest) []layout.ClassSummary {
	p := &layout.Plan{Entries: make([]layout.Entry, 0, len(m.Tensors))}
	for _, t := range m.Tensors {
		if !t.Class.Valid() || !t.Format.Valid() {
			continue
		}
		p.Entries = append(p.Entries, layout.Entry{Name: t.Name, Class: t.Class, Format: t.Format, DType: t.DType, Shape: t.Shape, Offset: t.Offset, Size: t.Size})
	}
	return p.Summary()
}
