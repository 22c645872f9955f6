package enginepack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// File names inside a pack directory.
const (
	ManifestFile = "model.dgq.json"
	BlobFile     = "model.dgq.bin"
)

// External file roles.
const (
	RoleHFSafetensors = "hf_safetensors"
	RolePackBin       = "pack_bin"
)

// BaseModel pins the Hugging Face snapshot a layered pack's hf_safetensors
// references resolve against.
type BaseModel struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
}

// ExternalFile is one file a layered pack's tensors may be read from.
type ExternalFile struct {
	Role         string `json:"role"`
	Path         string `json:"path"`
	ExpectedSize uint64 `json:"expected_size"`
	HeaderSHA256 string `json:"header_sha256,omitempty"`
}

// Source says where a layered pack's tensor bytes live: Kind "local" with
// LocalOffset into the pack's own blob, or Kind "external" with File (a key
// of Manifest.ExternalFiles) and Offset into that file.
type Source struct {
	Kind        string `json:"kind"`
	LocalOffset uint64 `json:"local_offset,omitempty"`
	File        string `json:"file,omitempty"`
	Offset      uint64 `json:"offset,omitempty"`
}

// MarshalJSON writes the engine's field set for the source's kind, so that
// encoding/json agrees with MarshalManifest (a zero offset is not omitted).
func (s Source) MarshalJSON() ([]byte, error) {
	if s.Kind == "local" {
		return json.Marshal(struct {
			Kind        string `json:"kind"`
			LocalOffset uint64 `json:"local_offset"`
		}{s.Kind, s.LocalOffset})
	}
	return json.Marshal(struct {
		Kind   string `json:"kind"`
		File   string `json:"file"`
		Offset uint64 `json:"offset"`
	}{s.Kind, s.File, s.Offset})
}

// TensorEntry is one manifest tensor. Offset is in the canonical blob
// address space; Source is nil in a self-contained pack.
type TensorEntry struct {
	Name    string  `json:"name"`
	Kind    string  `json:"kind"`
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offset  uint64  `json:"offset"`
	ByteLen uint64  `json:"byte_len"`
	Source  *Source `json:"source,omitempty"`
}

// Manifest is model.dgq.json. Field order is the engine's serialization
// order. Pointer and map fields are omitted when nil or empty.
type Manifest struct {
	Version          uint32                  `json:"version"`
	Profile          string                  `json:"profile"`
	SourceModel      string                  `json:"source_model"`
	BlobFile         string                  `json:"blob_file"`
	ExpertSplit      *uint64                 `json:"expert_split,omitempty"`
	LocalExpertSplit *uint64                 `json:"local_expert_split,omitempty"`
	BaseModel        *BaseModel              `json:"base_model,omitempty"`
	ExternalFiles    map[string]ExternalFile `json:"external_files,omitempty"`
	CustomClasses    map[string]string       `json:"custom_classes,omitempty"`
	Tensors          []TensorEntry           `json:"tensors"`
}

// ReadManifest parses a pack directory's manifest with encoding/json.
func ReadManifest(packDir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(packDir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("enginepack: read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("enginepack: parse manifest: %w", err)
	}
	return &m, nil
}

// MarshalManifest writes m byte for byte as the engine's pretty JSON
// serializer does: two-space indent, `"key": value`, one array element per
// line, `[]` for an empty array, maps in byte-wise key order, optional keys
// left out, and no trailing newline.
func MarshalManifest(m *Manifest) []byte {
	w := &prettyWriter{}
	w.open('{')
	w.key("version").raw(strconv.FormatUint(uint64(m.Version), 10))
	w.key("profile").str(m.Profile)
	w.key("source_model").str(m.SourceModel)
	w.key("blob_file").str(m.BlobFile)
	if m.ExpertSplit != nil {
		w.key("expert_split").uint(*m.ExpertSplit)
	}
	if m.LocalExpertSplit != nil {
		w.key("local_expert_split").uint(*m.LocalExpertSplit)
	}
	if m.BaseModel != nil {
		w.key("base_model").open('{')
		w.key("repo").str(m.BaseModel.Repo)
		w.key("revision").str(m.BaseModel.Revision)
		w.close('}')
	}
	if len(m.ExternalFiles) > 0 {
		w.key("external_files")
		writeExternalFiles(w, m.ExternalFiles)
	}
	if len(m.CustomClasses) > 0 {
		w.key("custom_classes").open('{')
		for _, k := range sortedKeys(m.CustomClasses) {
			w.key(k).str(m.CustomClasses[k])
		}
		w.close('}')
	}
	w.key("tensors").open('[')
	for i := range m.Tensors {
		w.elem()
		writeTensor(w, &m.Tensors[i])
	}
	w.close(']')
	w.close('}')
	return w.buf.Bytes()
}

func writeExternalFiles(w *prettyWriter, files map[string]ExternalFile) {
	w.open('{')
	for _, k := range sortedKeys(files) {
		f := files[k]
		w.key(k).open('{')
		w.key("role").str(f.Role)
		w.key("path").str(f.Path)
		w.key("expected_size").uint(f.ExpectedSize)
		if f.HeaderSHA256 != "" {
			w.key("header_sha256").str(f.HeaderSHA256)
		}
		w.close('}')
	}
	w.close('}')
}

func writeTensor(w *prettyWriter, t *TensorEntry) {
	w.open('{')
	w.key("name").str(t.Name)
	w.key("kind").str(t.Kind)
	w.key("dtype").str(t.DType)
	w.key("shape").open('[')
	for _, d := range t.Shape {
		w.elem()
		w.raw(strconv.FormatInt(d, 10))
	}
	w.close(']')
	w.key("offset").uint(t.Offset)
	w.key("byte_len").uint(t.ByteLen)
	if s := t.Source; s != nil {
		w.key("source").open('{')
		w.key("kind").str(s.Kind)
		if s.Kind == "local" {
			w.key("local_offset").uint(s.LocalOffset)
		} else {
			w.key("file").str(s.File)
			w.key("offset").uint(s.Offset)
		}
		w.close('}')
	}
	w.close('}')
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// prettyWriter emits serde_json's pretty format. Each open container
// remembers whether it has had a member yet, which decides the separator
// before the next one and whether the closing bracket goes on a new line.
type prettyWriter struct {
	buf   bytes.Buffer
	depth int
	full  []bool
}

func (w *prettyWriter) open(c byte) *prettyWriter {
	w.buf.WriteByte(c)
	w.depth++
	w.full = append(w.full, false)
	return w
}

func (w *prettyWriter) close(c byte) {
	had := w.full[len(w.full)-1]
	w.full = w.full[:len(w.full)-1]
	w.depth--
	if had {
		w.newline()
	}
	w.buf.WriteByte(c)
}

// elem starts the next member of the innermost container.
func (w *prettyWriter) elem() {
	if w.full[len(w.full)-1] {
		w.buf.WriteByte(',')
	}
	w.full[len(w.full)-1] = true
	w.newline()
}

func (w *prettyWriter) newline() {
	w.buf.WriteByte('\n')
	for range w.depth {
		w.buf.WriteString("  ")
	}
}

func (w *prettyWriter) key(k string) *prettyWriter {
	w.elem()
	w.str(k)
	w.buf.WriteString(": ")
	return w
}

func (w *prettyWriter) raw(s string) { w.buf.WriteString(s) }

func (w *prettyWriter) uint(v uint64) { w.raw(strconv.FormatUint(v, 10)) }

// str writes a JSON string escaped as serde_json escapes: quote, backslash,
// \b \f \n \r \t by name, other control characters as \u00xx (lower-case
// hex), everything else (DEL, non-ASCII, U+2028) verbatim. Invalid UTF-8,
// which a Rust string cannot hold, becomes U+FFFD as a lossy path display
// would make it.
func (w *prettyWriter) str(s string) {
	const hexDigits = "0123456789abcdef"
	w.buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			w.buf.WriteString(`\"`)
		case r == '\\':
			w.buf.WriteString(`\\`)
		case r == '\b':
			w.buf.WriteString(`\b`)
		case r == '\f':
			w.buf.WriteString(`\f`)
		case r == '\n':
			w.buf.WriteString(`\n`)
		case r == '\r':
			w.buf.WriteString(`\r`)
		case r == '\t':
			w.buf.WriteString(`\t`)
		case r < 0x20:
			w.buf.WriteString(`\u00`)
			w.buf.WriteByte(hexDigits[r>>4])
			w.buf.WriteByte(hexDigits[r&0xf])
		default:
			w.buf.WriteRune(r) // utf8.RuneError for invalid bytes
		}
	}
	w.buf.WriteByte('"')
}
