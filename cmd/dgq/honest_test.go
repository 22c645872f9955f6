package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// Issue 21: --reference FILE was ignored for reference.safetensors beside
// it, and a missing FILE was reported under that other name. The file given
// is read (a decoy reference.safetensors beside it is not), and a missing one
// is refused with exit 3 naming it, by parity and smoke alike.
func TestReferenceFileGiven(t *testing.T) {
	pack := demoPack(t, "bf16")
	dir := t.TempDir()
	for name, as := range map[string]string{"reference.json": "mine.json", "reference.safetensors": "mine.safetensors"} {
		b, err := testmodel.ReadReference(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, as), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A decoy under the default name: reading it fails.
	if err := os.WriteFile(filepath.Join(dir, "reference.safetensors"), []byte("not a reference"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, given := range []string{"mine.safetensors", "mine.json"} {
		r := dgqRun("parity", pack, "--reference", filepath.Join(dir, given))
		if r.code != exitOK || !strings.Contains(r.stdout, "parity: pass") {
			t.Errorf("parity --reference %s: exit %d\n%s\n%s", given, r.code, r.stdout, r.stderr)
		}
	}
	missing := filepath.Join(dir, "missing.safetensors")
	for _, args := range [][]string{{"parity", pack, "--reference", missing}, {"smoke", pack, "--reference", missing}} {
		r := dgqRun(args...)
		assertOneLineError(t, r, exitInvalid, "missing.safetensors")
		if strings.Contains(r.stderr, "reference.json") || strings.Contains(r.stderr, "reference.safetensors") {
			t.Errorf("dgq %s: the error names another file: %s", args[0], r.stderr)
		}
	}
}

// Issue 21: verify copied a snapshot outside the hub cache into $TMPDIR
// silently. It now says so on stderr (one note line with the size and the
// folder), writes the copy in --tmp DIR, and leaves nothing there.
func TestVerifyAnnouncesTheCopy(t *testing.T) {
	pack := demoPack(t, "bf16")
	src, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	r := dgqRun(verifyArgs(pack, "--source", src, "--tmp", tmp, "--generations", "0")...)
	if r.code != exitOK {
		t.Fatalf("verify: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "note: copying the source snapshot "+src) ||
		!strings.Contains(lines[0], filepath.Join(tmp, "dgq-verify-source-")) || !strings.Contains(lines[0], "bytes") {
		t.Errorf("stderr %q: want one note naming the snapshot, the folder in --tmp and the size", r.stderr)
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Errorf("--tmp holds %v after the run (%v)", entries, err)
	}
	// A --tmp that cannot hold a folder: an I/O error, nothing announced.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = dgqRun(verifyArgs(pack, "--source", src, "--tmp", file, "--generations", "0")...)
	assertOneLineError(t, r, exitIO, file)
}

// Issue 21: quantize --report FILE replaced any existing file. Without
// --force an existing FILE is refused; with it only a previous report is
// replaced; both refusals are usage errors (exit 2) and leave the file.
func TestReportNeedsForce(t *testing.T) {
	src := tiny(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	if r := dgqRun("quantize", "--profile", "q4", "-m", src, "-o", filepath.Join(dir, "a"), "--report", report); r.code != 0 {
		t.Fatalf("quantize: %s", r.stderr)
	}
	assertOneLineError(t, dgqRun("quantize", "--profile", "q4", "-m", src, "-o", filepath.Join(dir, "b"), "--report", report), exitUsage, "--force")
	if r := dgqRun("quantize", "--profile", "q4", "-m", src, "-o", filepath.Join(dir, "b"), "--report", report, "--force"); r.code != 0 {
		t.Fatalf("quantize --force over a previous report: %s", r.stderr)
	}
	manifest := filepath.Join(dir, "a", "model.dgq.json")
	before, _ := os.ReadFile(manifest)
	assertOneLineError(t, dgqRun("quantize", "--profile", "q4", "-m", src, "-o", filepath.Join(dir, "c"), "--report", manifest, "--force"),
		exitUsage, "is not a dgq quantize report")
	if after, _ := os.ReadFile(manifest); string(after) != string(before) {
		t.Error("the other pack's manifest was changed")
	}
}
