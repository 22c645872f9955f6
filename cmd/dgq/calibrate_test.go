package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/calibrate"
)

func calibrateText(t *testing.T, reps int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cal.txt")
	if err := os.WriteFile(p, []byte(strings.Repeat("The sea was calm that morning, and the boats went out early. ", reps)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCalibrateCLI: the text output ends with the file written and shows
// the coverage table; --json is one object with the contract's keys; a
// second run without --force is refused.
func TestCalibrateCLI(t *testing.T) {
	bf16, text := demoPack(t, "bf16"), calibrateText(t, 20)
	out := filepath.Join(t.TempDir(), "tiny.imatrix.safetensors")
	r := dgqRun("calibrate", bf16, "--text", text, "-o", out, "--windows", "2", "--prompt-len", "8", "--workers", "2")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if lines[len(lines)-1] != out || !strings.Contains(r.stdout, "experts reached") {
		t.Errorf("output:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "warning: ") || !strings.Contains(r.stderr, "vision") {
		t.Errorf("no warning of the unreached vision tensors: %s", r.stderr)
	}
	assertOneLineError(t, dgqRun("calibrate", bf16, "--text", text, "-o", out, "--prompt-len", "8"), exitUsage, "--force")
	r = dgqRun("calibrate", bf16, "--text", text, "-o", out, "--windows", "2", "--prompt-len", "8", "--workers", "2", "--force", "--json")
	if r.code != 0 {
		t.Fatalf("--json: exit %d: %s", r.code, r.stderr)
	}
	var res calibrate.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"path"`, `"tensors"`, `"windows"`, `"positions"`, `"coverage"`, `"experts_reached"`, `"min_count"`, `"elapsed_s"`} {
		if !strings.Contains(r.stdout, k) {
			t.Errorf("--json lacks %s", k)
		}
	}
	if res.Path != out || res.Windows != 2 || len(res.Coverage) == 0 {
		t.Errorf("%+v", res)
	}
}

// TestCalibrateRefusals: each refusal is one line with exit 2.
func TestCalibrateRefusals(t *testing.T) {
	home := t.TempDir()
	for _, k := range []string{hfcache.EnvDGQHFHome, hfcache.EnvHFHubCache, hfcache.EnvHFHubCacheLegacy} {
		t.Setenv(k, "")
	}
	t.Setenv(hfcache.EnvHFHome, home)
	bf16, text := demoPack(t, "bf16"), calibrateText(t, 20)
	out := filepath.Join(t.TempDir(), "x.imatrix.safetensors")
	assertOneLineError(t, dgqRun("calibrate", bf16, "--text", calibrateText(t, 1), "-o", out), exitUsage, "one window needs 143")
	assertOneLineError(t, dgqRun("calibrate", demoPack(t, "q4"), "--text", text, "-o", out, "--prompt-len", "8"), exitUsage, "bf16")
	inCache := filepath.Join(home, "hub", "models--x--y", "snapshots", "z", "x.imatrix.safetensors")
	assertOneLineError(t, dgqRun("calibrate", bf16, "--text", text, "-o", inCache, "--prompt-len", "8"), exitUsage, "Hugging Face cache")
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}
