package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// cardSetup lays the tiny checkpoint out as the hub cache (with a base card
// naming a licence) and quantizes it into a q4 pack.
func cardSetup(t *testing.T) (root, pack string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "hub")
	snap, err := testmodel.WriteHubCache(root)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(snap, "README.md"), []byte("---\nlicense: apache-2.0\n---\n"), 0o644)
	t.Setenv("DGQ_HF_HOME", root)
	pack = filepath.Join(t.TempDir(), "q4")
	if r := dgqRun("quantize", "--profile", "q4", "-m", testmodel.HubInfo().Repo, "-o", pack); r.code != 0 {
		t.Fatalf("quantize: %s", r.stderr)
	}
	return root, pack
}

func TestCardCommand(t *testing.T) {
	_, pack := cardSetup(t)
	report := filepath.Join(t.TempDir(), "verify.json")
	r := dgqRun(verifyArgs(pack, "--json")...)
	if r.code != 0 {
		t.Fatalf("verify: %s", r.stderr)
	}
	os.WriteFile(report, []byte(r.stdout), 0o644)

	r = dgqRun("card", pack, "--verify", report, "--repo", "me/tiny-q4", "--json")
	if r.code != 0 {
		t.Fatalf("card --json: exit %d: %s", r.code, r.stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("card --json is not one object: %v\n%s", err, r.stdout)
	}
	hasKeys(t, "card", res, "path", "base_model", "base_revision", "license", "profile", "runs_on", "bytes", "verify_included", "replaced", "notes")
	hub := testmodel.HubInfo()
	if res["path"] != filepath.Join(pack, "README.md") || res["base_model"] != hub.Repo || res["base_revision"] != hub.Revision ||
		res["license"] != "apache-2.0" || res["profile"] != "q4" || res["verify_included"] != true || res["replaced"] != false {
		t.Errorf("card --json: %v", res)
	}
	doc, err := os.ReadFile(filepath.Join(pack, "README.md"))
	if err != nil || float64(len(doc)) != res["bytes"] {
		t.Fatalf("README.md: %v, %d bytes", err, len(doc))
	}
	for _, w := range []string{"base_model: " + hub.Repo, "base_model_relation: quantized", "| KL divergence, mean |", "dgq run me/tiny-q4 --prompt"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("card lacks %q", w)
		}
	}
	// The text output is the path; the pack still audits clean.
	if r = dgqRun("card", pack); r.code != 0 || r.stdout != filepath.Join(pack, "README.md")+"\n" {
		t.Errorf("card: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = dgqRun("audit", pack); r.code != 0 {
		t.Errorf("audit after card: exit %d\n%s", r.code, r.stdout)
	}
}

func TestCardCommandErrors(t *testing.T) {
	root, pack := cardSetup(t)
	inCache := filepath.Join(root, "q4")
	if err := os.CopyFS(inCache, os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(t.TempDir(), "foreign")
	if err := os.CopyFS(foreign, os.DirFS(pack)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(foreign, "README.md"), []byte("# mine\n"), 0o644)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("{"), 0o644)
	empty := t.TempDir()
	noBase := filepath.Join(t.TempDir(), "nobase")
	if r := dgqRun("quantize", "--profile", "q4", "-m", tiny(t), "-o", noBase); r.code != 0 {
		t.Fatalf("quantize: %s", r.stderr)
	}
	cases := []struct {
		name    string
		args    []string
		code    int
		mention string
	}{
		{"no pack", []string{"card"}, exitUsage, "card"},
		{"not a pack", []string{"card", empty}, exitInvalid, "not a dgq pack"},
		{"in the cache", []string{"card", inCache}, exitUsage, "--local-dir"},
		{"bad report", []string{"card", pack, "--verify", bad}, exitInvalid, bad},
		{"missing report", []string{"card", pack, "--verify", filepath.Join(empty, "r.json")}, exitInvalid, "r.json"},
		{"hand-written README", []string{"card", foreign}, exitUsage, "--force"},
		{"bad repo", []string{"card", pack, "--repo", "x"}, exitUsage, "--repo"},
		{"no base model", []string{"card", noBase}, exitInvalid, "--base-model"},
		{"another base model", []string{"card", pack, "--base-model", "other/model"}, exitUsage, "other/model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertOneLineError(t, dgqRun(c.args...), c.code, c.mention)
		})
	}
	if b, _ := os.ReadFile(filepath.Join(foreign, "README.md")); string(b) != "# mine\n" {
		t.Errorf("the hand-written README.md changed: %q", b)
	}
	for _, dir := range []string{pack, inCache, empty} {
		if _, err := os.Stat(filepath.Join(dir, dgq.CardName)); err == nil {
			t.Errorf("README.md written into %s", dir)
		}
	}
	// --base-model names what the pack does not record.
	if r := dgqRun("card", noBase, "--base-model", testmodel.HubInfo().Repo, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"base_model": "`+testmodel.HubInfo().Repo+`"`) {
		t.Errorf("card --base-model: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	// --force replaces it; --json failures print the error object.
	if r := dgqRun("card", foreign, "--force"); r.code != 0 {
		t.Errorf("card --force: exit %d: %s", r.code, r.stderr)
	}
	r := dgqRun("card", empty, "--json")
	var obj jsonError
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj.Error.Code != exitInvalid || obj.Error.Kind != "invalid_input" {
		t.Errorf("--json error: %q (%v)", r.stdout, err)
	}
}
