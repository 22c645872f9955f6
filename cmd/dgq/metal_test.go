package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Backend metal is built in. Off macOS on Apple silicon every command that
// takes --backend fails at once with one line naming what is missing and
// exit code 6, whatever the precision (docs/cli.md); on a Mac the commands
// run (docs/metal.md lists them), and --precision bf16 is a usage error, in
// one line. The host engine, which runs the backend's kernels on Linux in
// tests, is no choice of the CLI.
func TestMetalBackend(t *testing.T) {
	q4, bf16 := demoPack(t, "q4"), demoPack(t, "bf16")
	ref := filepath.Join("..", "..", "dgq", "testmodel", "tiny", "reference", "reference.safetensors")
	if runtime.GOOS == "darwin" {
		r := dgqRun("parity", bf16, "--reference", ref, "--backend", "metal", "--precision", "bf16")
		assertOneLineError(t, r, exitUsage, "metal precision bf16 is not implemented")
		t.Skip("on macOS backend metal runs: docs/metal.md, \"Verifying on a Mac\"")
	}
	mention := "backend unavailable: metal unavailable: needs macOS on Apple silicon"
	for _, c := range []struct {
		name string
		args []string
	}{
		{"parity", []string{"parity", bf16, "--reference", ref, "--backend", "metal"}},
		{"parity bf16", []string{"parity", bf16, "--reference", ref, "--backend", "metal", "--precision", "bf16"}},
		{"bench", []string{"bench", q4, "--backend", "metal"}},
		{"run", []string{"run", q4, "--prompt", "In the beginning", "--backend", "metal"}},
		{"verify", verifyArgs(q4, "--source", bf16, "--backend", "metal")},
	} {
		t.Run(c.name, func(t *testing.T) {
			assertOneLineError(t, dgqRun(c.args...), exitBackend, mention)
		})
	}

	// --json: the error object on stdout, kind backend_unavailable.
	r := dgqRun("bench", q4, "--backend", "metal", "--json")
	var obj jsonError
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || r.code != exitBackend || obj.Error.Code != exitBackend ||
		obj.Error.Kind != "backend_unavailable" || !strings.Contains(obj.Error.Message, mention) {
		t.Errorf("bench --json: exit %d, %q (%v)", r.code, r.stdout, err)
	}

	// An unknown backend is a usage error that lists the built-in ones.
	assertOneLineError(t, dgqRun("bench", q4, "--backend", "nope"), exitUsage, "(valid: cpu, cuda, metal)")
	assertOneLineError(t, dgqRun("parity", bf16, "--reference", ref, "--backend", "nope"), exitUsage, "(valid: cpu, cuda, metal)")
	if r := dgqRun("bench", "--help"); !strings.Contains(r.stdout, "compute backend: cpu, cuda, metal") {
		t.Errorf("bench --help does not list metal:\n%s", r.stdout)
	}
}
