package dgq

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestDemoLeavesNothingBehind: demo without an output removes everything it
// made (snapshot and pack) from the temporary folder; with one it keeps the
// pack there and nothing else.
func TestDemoLeavesNothingBehind(t *testing.T) {
	for _, keep := range []bool{false, true} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		var out string
		if keep {
			out = filepath.Join(t.TempDir(), "demo.dgq")
		}
		res, err := Demo(context.Background(), DemoOptions{Out: out})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Audit.OK || res.Kept != keep {
			t.Fatalf("keep %v: audit ok %v, kept %v", keep, res.Audit.OK, res.Kept)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("keep %v: demo left %v in the temporary folder", keep, left)
		}
		_, err = os.Stat(filepath.Join(res.Out, ManifestName))
		if keep != (err == nil) {
			t.Errorf("keep %v: the pack at %s: %v", keep, res.Out, err)
		}
	}
}
