package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
)

type result struct {
	code           int
	stdout, stderr string
}

func dgqRun(args ...string) result {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func tiny(t *testing.T) string {
	t.Helper()
	dir, err := testmodel.WriteSnapshot(filepath.Join(t.TempDir(), "snap"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Errors are one line on stderr starting with "dgq: ", with a non-zero code.
func assertOneLineError(t *testing.T, r result, code int, mention string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "dgq: ") {
		t.Errorf("stderr is not one 'dgq: ' line: %q", r.stderr)
	}
	if !strings.Contains(r.stderr, mention) {
		t.Errorf("stderr %q does not mention %q", r.stderr, mention)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr holds a panic trace: %q", r.stderr)
	}
}

func demoPack(t *testing.T, profile string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), profile)
	if r := dgqRun("demo", "--profile", profile, "-o", out); r.code != 0 {
		t.Fatalf("demo: %s", r.stderr)
	}
	return out
}

func TestQuantizeInspectAuditContract(t *testing.T) {
	src := tiny(t)
	out := filepath.Join(t.TempDir(), "p.dgq")
	report := filepath.Join(t.TempDir(), "report.json")
	r := dgqRun("quantize", "--profile", "nvfp4x", "--set", "attn=q8", "-m", src, "-o", out, "--report", report)
	if r.code != 0 {
		t.Fatalf("quantize: %d %s", r.code, r.stderr)
	}
	r = dgqRun("inspect", "--json", out)
	if r.code != 0 {
		t.Fatalf("inspect: %d %s", r.code, r.stderr)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("inspect --json is not one JSON object: %v", err)
	}
	for _, k := range []string{"format_version", "profile", "layered", "blob", "blob_size", "expert_split", "tensors", "external_files", "runs_on"} {
		if _, ok := info[k]; !ok {
			t.Errorf("inspect --json lacks %q", k)
		}
	}
	// nvfp4x with an override: the engine's q4 profile with custom classes, version 4, which the engine runs.
	if info["layered"] != false || info["profile"] != "nvfp4x" || info["format_version"].(float64) != 4 ||
		fmt.Sprint(info["runs_on"]) != "[dgq diffgemma]" {
		t.Errorf("inspect values: layered %v profile %v version %v runs_on %v", info["layered"], info["profile"], info["format_version"], info["runs_on"])
	}
	tensors := info["tensors"].([]any)
	classes := map[string]bool{}
	for _, x := range tensors {
		tn := x.(map[string]any)
		for _, k := range []string{"name", "class", "format", "dtype", "shape", "offset", "size", "digest", "source"} {
			if _, ok := tn[k]; !ok {
				t.Fatalf("tensor entry lacks %q: %v", k, tn)
			}
		}
		if tn["source"] != nil {
			t.Errorf("self-contained pack has a source: %v", tn)
		}
		classes[tn["class"].(string)+"/"+tn["format"].(string)] = true
	}
	for _, want := range []string{"experts/nvfp4_block", "attn/q8_row", "sc/q8_row", "embed/raw", "dense/raw"} {
		if !classes[want] {
			t.Errorf("no %s tensor in %v", want, classes)
		}
	}
	var rep struct {
		Tensors []map[string]any `json:"tensors"`
	}
	b, _ := os.ReadFile(report)
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Tensors) != len(tensors) {
		t.Fatalf("report: %v, %d entries", err, len(rep.Tensors))
	}
	for _, k := range []string{"name", "format", "rel_rmse", "max_abs_err"} {
		if _, ok := rep.Tensors[0][k]; !ok {
			t.Errorf("report entry lacks %q", k)
		}
	}
	r = dgqRun("audit", "--json", out)
	var aud struct {
		OK       bool             `json:"ok"`
		Findings []map[string]any `json:"findings"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &aud) != nil || !aud.OK || aud.Findings == nil {
		t.Fatalf("audit --json: %d %q", r.code, r.stdout)
	}
	// Damage one tensor: audit exits non-zero and names it.
	m, _ := dgq.ReadManifest(out)
	victim := m.Tensors[len(m.Tensors)-1]
	blob := filepath.Join(out, dgq.BlobName)
	data, _ := os.ReadFile(blob)
	data[victim.Offset] ^= 1
	os.WriteFile(blob, data, 0o644)
	r = dgqRun("audit", "--json", out)
	if r.code != exitInvalid || json.Unmarshal([]byte(r.stdout), &aud) != nil || aud.OK || len(aud.Findings) != 1 || aud.Findings[0]["tensor"] != victim.Name {
		t.Fatalf("audit of a damaged pack: %d %q", r.code, r.stdout)
	}
	r = dgqRun("audit", out)
	if r.code != exitInvalid || !strings.Contains(r.stdout, victim.Name) {
		t.Fatalf("text audit of a damaged pack: %d %q", r.code, r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	src := tiny(t)
	out := filepath.Join(t.TempDir(), "o")
	cases := []struct {
		name    string
		args    []string
		code    int
		mention string
	}{
		{"no profile", []string{"quantize", "-m", src, "-o", out}, exitUsage, "profile"},
		{"no output", []string{"quantize", "--profile", "q4", "-m", src}, exitUsage, "-o"},
		{"unknown flag", []string{"quantize", "--bogus"}, exitUsage, "bogus"},
		{"locked class", []string{"quantize", "--profile", "q4", "--set", "embed=q4", "-m", src, "-o", out}, exitUsage, "embed"},
		{"bad format", []string{"quantize", "--profile", "q4", "--set", "attn=q9", "-m", src, "-o", out}, exitUsage, "q9"},
		{"bad encoder", []string{"quantize", "--profile", "q4", "--encoder", "fast", "-m", src, "-o", out}, exitUsage, `encoder "fast"`},
		{"same target twice", []string{"quantize", "--profile", "q4", "--set", "attn=q8", "--set", "attn=q4", "-m", src, "-o", out}, exitUsage, "attn"},
		{"missing source", []string{"quantize", "--profile", "q4", "-m", filepath.Join(src, "x"), "-o", out}, exitInvalid, "x"},
		{"inspect no args", []string{"inspect"}, exitUsage, "inspect"},
		{"inspect not a pack", []string{"inspect", src}, exitInvalid, "not a dgq pack"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "frobnicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertOneLineError(t, dgqRun(c.args...), c.code, c.mention)
			if _, err := os.Stat(out); err == nil {
				t.Fatal("output created")
			}
		})
	}
}

// The overlay workflow from the command line, with HF_HOME pointing at a
// Hugging Face cache that holds the tiny checkpoint.
func TestOverlayWorkflow(t *testing.T) {
	home := t.TempDir()
	snap, err := testmodel.WriteHubCache(filepath.Join(home, "hub"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DGQ_HF_HOME", "")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_HOME", home)
	dir := t.TempDir()
	ov, mono, direct, back := filepath.Join(dir, "ov"), filepath.Join(dir, "mono"), filepath.Join(dir, "direct"), filepath.Join(dir, "back")
	for _, args := range [][]string{
		{"quantize", "--profile", "q4", "--overlay", "-m", "dgq-test/diffusiongemma-tiny", "-o", ov},
		{"quantize", "--profile", "q4", "-m", "dgq-test/diffusiongemma-tiny@main", "-o", direct},
		{"audit", ov},
		{"repack", "--monolithic", "-m", ov, "-o", mono},
		{"repack", "--overlay", "-m", direct, "-o", back},
		{"audit", back},
		{"verify", ov, "--windows", "1", "--generations", "0"}, // the overlay's pinned source, found in the cache
		{"run", ov, "--prompt", "hi", "--seed", "1", "--max-steps", "4"},
	} {
		if r := dgqRun(args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	a, _ := os.ReadFile(filepath.Join(mono, dgq.BlobName))
	b, _ := os.ReadFile(filepath.Join(direct, dgq.BlobName))
	if !bytes.Equal(a, b) {
		t.Fatal("repack --monolithic differs from a direct quantize")
	}
	r := dgqRun("inspect", "--json", ov)
	var info struct {
		Layered       bool             `json:"layered"`
		ExternalFiles []map[string]any `json:"external_files"`
		Tensors       []struct {
			Source map[string]any `json:"source"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || !info.Layered || len(info.ExternalFiles) == 0 {
		t.Fatalf("inspect --json of the overlay: %v %s", err, r.stdout)
	}
	for _, k := range []string{"id", "role", "repo", "revision", "path", "size", "header_sha256"} {
		if _, ok := info.ExternalFiles[0][k]; !ok {
			t.Errorf("external file lacks %q", k)
		}
	}
	kinds := map[string]bool{}
	for _, tn := range info.Tensors {
		kinds[tn.Source["kind"].(string)] = true
		if _, ok := tn.Source["offset"]; !ok {
			t.Fatal("source without offset")
		}
	}
	if !kinds["local"] || !kinds["external"] {
		t.Errorf("source kinds %v", kinds)
	}
	// A missing shard: audit exits 4 and prints the fix.
	target, _ := filepath.EvalSymlinks(filepath.Join(snap, "model-00002-of-00004.safetensors"))
	os.Remove(target)
	r = dgqRun("audit", ov)
	if r.code != exitStale || !strings.Contains(r.stdout, "dgq download dgq-test/diffusiongemma-tiny --revision ") || !strings.Contains(r.stdout, "--include model-00002-of-00004.safetensors") {
		t.Fatalf("audit with a missing shard: %d %q", r.code, r.stdout)
	}
	assertOneLineError(t, dgqRun("repack", "--monolithic", "-m", ov, "-o", filepath.Join(dir, "m2")), exitStale, "dgq download")
	assertOneLineError(t, dgqRun("repack", "-m", ov, "-o", filepath.Join(dir, "m3")), exitUsage, "--overlay")
}

// With --json, results and errors are one JSON object on stdout.
func TestJSONResultsAndErrors(t *testing.T) {
	src := tiny(t)
	r := dgqRun("quantize", "--profile", "q4", "-m", src, "--dry-run", "--json")
	var res map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res["dry_run"] != true || res["summary"] == nil {
		t.Fatalf("quantize --json dry run: %d %q", r.code, r.stdout)
	}
	for _, c := range []struct {
		args []string
		code int
		kind string
	}{
		{[]string{"quantize", "--profile", "q4", "--set", "embed=q4", "-m", src, "-o", filepath.Join(t.TempDir(), "o"), "--json"}, exitUsage, "usage"},
		{[]string{"inspect", "--json", t.TempDir()}, exitInvalid, "invalid_input"},
		{[]string{"quantize", "--bogus", "--json"}, exitUsage, "usage"},
	} {
		r := dgqRun(c.args...)
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Kind    string `json:"kind"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if r.code != c.code || json.Unmarshal([]byte(r.stdout), &e) != nil || e.Error.Code != c.code || e.Error.Kind != c.kind || !strings.HasPrefix(e.Error.Message, "dgq: ") {
			t.Errorf("%v: exit %d, stdout %q", c.args, r.code, r.stdout)
		}
	}
}
