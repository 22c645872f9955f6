//go:build unix

package dgq

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPublishedModesFollowUmask: a pack folder is 0755 and its files and a
// --report 0644, less the umask — not the 0700/0600 of os.MkdirTemp and
// os.CreateTemp through which they are staged.
func TestPublishedModesFollowUmask(t *testing.T) {
	src := tinySnapshot(t)
	for _, mask := range []uint32{0o022, 0o027, 0o077} {
		t.Run(fs.FileMode(mask).String(), func(t *testing.T) {
			old := syscall.Umask(int(mask))
			saved := processUmask
			processUmask = mask
			defer func() { syscall.Umask(old); processUmask = saved }()
			work := t.TempDir()
			out, report := filepath.Join(work, "pack"), filepath.Join(work, "report.json")
			if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q4", ReportPath: report}); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]fs.FileMode{
				out:                              0o755 &^ fs.FileMode(mask),
				filepath.Join(out, BlobName):     0o644 &^ fs.FileMode(mask),
				filepath.Join(out, ManifestName): 0o644 &^ fs.FileMode(mask),
				report:                           0o644 &^ fs.FileMode(mask),
			} {
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if got := st.Mode().Perm(); got != want {
					t.Errorf("%s: mode %v, want %v", filepath.Base(path), got, want)
				}
			}
		})
	}
}
