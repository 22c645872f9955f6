package dgq

import (
	"github.com/dgq-dev/dgq/layout"
)

// PackInfo is what `dgq inspect` shows: the manifest's facts plus a per-class
// summary and the structural findings (no digests are checked).
type PackInfo struct {
	FormatVersion    int                   `json:"format_version"`
	Generator        string                `json:"generator"`
	Profile          string                `json:"profile"`
	Overrides        []layout.Override     `json:"overrides"`
	Layered          bool                  `json:"layered"`
	Blob             string                `json:"blob"`
	BlobSize         int64                 `json:"blob_size"`
	ExpertSplit      int64                 `json:"expert_split"`
	LocalExpertSplit *int64                `json:"local_expert_split,omitempty"`
	LocalBlobSize    *int64                `json:"local_blob_size,omitempty"`
	Source           *SourceInfo           `json:"source,omitempty"`
	Tensors          []Tensor              `json:"tensors"`
	ExternalFiles    []ExternalFile        `json:"external_files"`
	Files            []File                `json:"files"`
	Summary          []layout.ClassSummary `json:"summary"`
	Findings         []Finding             `json:"findings"`
}

// Inspect reads the pack's manifest and describes it. It fails only when the
// manifest cannot be read; rule violations are listed in Findings.
func Inspect(dir string) (*PackInfo, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	blobSize := int64(-1)
	if st, err := statBlob(dir, m); err == nil { // the local blob, for a layered pack
		blobSize = st
	}
	findings := Validate(m, blobSize)
	if findings == nil {
		findings = []Finding{}
	}
	info := &PackInfo{
		FormatVersion: m.FormatVersion, Generator: m.Generator, Profile: m.Profile, Overrides: m.Overrides,
		Layered: m.Layered(), Blob: m.Blob, BlobSize: m.BlobSize, ExpertSplit: m.ExpertSplit,
		LocalExpertSplit: m.LocalExpertSplit, LocalBlobSize: m.LocalBlobSize, Source: m.Source, Tensors: m.Tensors,
		ExternalFiles: m.ExternalFiles, Files: m.Files, Summary: summarize(m), Findings: findings,
	}
	if info.Overrides == nil {
		info.Overrides = []layout.Override{}
	}
	if info.ExternalFiles == nil {
		info.ExternalFiles = []ExternalFile{}
	}
	if info.Files == nil {
		info.Files = []File{}
	}
	if info.Tensors == nil {
		info.Tensors = []Tensor{}
	}
	return info, nil
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
