package dgq

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInspectSaysWhereAPackRuns: runs_on is the engine and dgq for the
// engine's versions, dgq for version 1000, nothing for a version neither
// knows; a missing, empty or truncated blob is a finding (a stat, no byte
// read).
func TestInspectSaysWhereAPackRuns(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		runsOn  []string
		finding string // a blob finding's message holds this; "" for none
	}{
		{"good", func(*testing.T, string) {}, []string{"dgq", "diffgemma"}, ""},
		{"dgq-only", func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = VersionDGQOnly }) }, []string{"dgq"}, ""},
		{"version 99", func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 99 }) }, []string{}, ""},
		{"missing blob", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, BlobName)) }, []string{"dgq", "diffgemma"}, "missing"},
		{"empty blob", func(t *testing.T, dir string) { os.Truncate(filepath.Join(dir, BlobName), 0) }, []string{"dgq", "diffgemma"}, "blob is 0 bytes"},
		{"truncated blob", func(t *testing.T, dir string) { os.Truncate(filepath.Join(dir, BlobName), 64) }, []string{"dgq", "diffgemma"}, "blob is 64 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := goodPack(t)
			c.damage(t, dir)
			info, err := Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			if info.RunsOn == nil || !slices.Equal(info.RunsOn, c.runsOn) {
				t.Errorf("runs_on %#v, want %v", info.RunsOn, c.runsOn)
			}
			var blob []string
			for _, f := range info.Findings {
				if f.Kind == KindBlob {
					blob = append(blob, f.Message)
				}
			}
			if c.finding == "" && len(blob) > 0 || c.finding != "" && !slices.ContainsFunc(blob, func(m string) bool { return strings.Contains(m, c.finding) }) {
				t.Errorf("blob findings %q, want one holding %q", blob, c.finding)
			}
		})
	}
}

// TestManifestDecodeErrorsNameKeys: a manifest value of the wrong type is
// named by its key and what it should hold, never by a Go type.
func TestManifestDecodeErrorsNameKeys(t *testing.T) {
	for doc, want := range map[string]string{
		`{"version":1,"profile":"q4","source_model":"x","blob_file":"b","tensors":[],"external_files":[1]}`: "key external_files holds an array, want an object",
		`{"version":"1","profile":"q4","source_model":"x","blob_file":"b","tensors":[]}`:                    "key version holds a string, want a whole number",
		`[1, 2]`:                               "the document is an array, want an object",
		`{"format_version": 2, "tensors": {}}`: "earlier planar format (format_version 2)",
	} {
		_, err := ParseManifest([]byte(doc))
		if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Go struct") {
			t.Errorf("ParseManifest(%s) = %v; want ErrManifest saying %q", doc, err, want)
		}
	}
}
