package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	out := filepath.Join(t.TempDir(), "demo.dgq")
	r := dgqRun("demo", "-o", out)
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"== quantize", "experts", "q4", "== audit", "ok (every rule and every digest checked)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if r.stderr != "" {
		t.Errorf("demo printed to stderr off a terminal: %q", r.stderr)
	}
}
