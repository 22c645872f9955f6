package dgq

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Issue 21: --report FILE used to replace any existing file silently (the
// manifest of another pack, the dgq binary). An existing file is refused
// without Force (ErrExists); with Force only a previous report is replaced,
// anything else is refused naming why (ErrUsage) — both usage errors, before
// anything is written, the file left as it was.
func TestReportRefusesToReplace(t *testing.T) {
	src := tinySnapshot(t)
	dir := t.TempDir()
	quantizeTo := func(out, report string, force bool) error {
		_, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: filepath.Join(dir, out), Profile: "q4", ReportPath: report, Force: force})
		return err
	}
	report := filepath.Join(dir, "report.json")
	if err := quantizeTo("a", report, false); err != nil {
		t.Fatal(err)
	}
	// A previous report: refused without --force, replaced with it.
	err := quantizeTo("b", report, false)
	if !errors.Is(err, ErrExists) || errclass.Of(err) != errclass.Usage || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("existing report without force: %v", err)
	}
	assertNoOutput(t, filepath.Join(dir, "b"))
	if err := quantizeTo("b", report, true); err != nil {
		t.Fatalf("previous report with force: %v", err)
	}
	// Files that are not reports: refused even with --force, untouched.
	manifest := filepath.Join(dir, "a", ManifestName)
	binary := filepath.Join(dir, "dgq")
	if err := os.WriteFile(binary, []byte("\x7fELF\x02\x01\x01"), 0o755); err != nil {
		t.Fatal(err)
	}
	object := filepath.Join(dir, "other.json")
	if err := os.WriteFile(object, []byte(`{"profile": "q4", "tensors": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ path, why string }{
		{manifest, "its keys are"},
		{binary, "not a JSON object"},
		{object, "its keys are"},
	} {
		before, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, force := range []bool{false, true} {
			err := quantizeTo("c", f.path, force)
			want := ErrExists
			if force {
				want = ErrUsage
			}
			if !errors.Is(err, want) || errclass.Of(err) != errclass.Usage {
				t.Fatalf("--report %s (force %v): %v, want %v", f.path, force, err, want)
			}
			if force && (!strings.Contains(err.Error(), "not a dgq quantize report") || !strings.Contains(err.Error(), f.why)) {
				t.Errorf("--report %s with force: %q does not say why (%q)", f.path, err, f.why)
			}
		}
		if after, _ := os.ReadFile(f.path); string(after) != string(before) {
			t.Errorf("%s was changed", f.path)
		}
	}
}
