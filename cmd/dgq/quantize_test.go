package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestDryRunTable(t *testing.T) {
	r := dgqRun("quantize", "--profile", "q4", "-m", tiny(t), "--dry-run")
	if r.code != 0 {
		t.Fatalf("dry run: %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"class", "bits/weight", "experts", "total", "nothing written"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestExistingOutputNeedsForce(t *testing.T) {
	src := tiny(t)
	out := filepath.Join(t.TempDir(), "o")
	if r := dgqRun("quantize", "--profile", "q4", "-m", src, "-o", out); r.code != 0 {
		t.Fatal(r.stderr)
	}
	assertOneLineError(t, dgqRun("quantize", "--profile", "q4", "-m", src, "-o", out), exitUsage, "--force")
	if r := dgqRun("quantize", "--profile", "q5", "-m", src, "-o", out, "--force"); r.code != 0 {
		t.Fatal(r.stderr)
	}
}
