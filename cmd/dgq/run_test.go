package main

import (
	"strings"
	"testing"
)

func TestRunIsDeterministic(t *testing.T) {
	pack := demoPack(t, "q4")
	a := dgqRun("run", pack, "--prompt", "Tell me about the sea", "--seed", "5")
	b := dgqRun("run", pack, "--prompt", "Tell me about the sea", "--seed", "5")
	if a.code != 0 || b.code != 0 || a.stdout != b.stdout || a.stdout == "" {
		t.Fatalf("run twice: %d %q / %d %q (%s)", a.code, a.stdout, b.code, b.stdout, a.stderr)
	}
	tr := dgqRun("run", pack, "--prompt", "Tell me about the sea", "--seed", "5", "--trace")
	if tr.stdout != a.stdout || !strings.Contains(tr.stderr, "accepted") || !strings.Contains(tr.stderr, "mean entropy") {
		t.Fatalf("--trace: %q %q", tr.stdout, tr.stderr)
	}
	assertOneLineError(t, dgqRun("run", pack), exitUsage, "--prompt")
}
