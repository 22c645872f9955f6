package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectSaysWhatIsWrong: a version neither dgq nor the engine knows
// runs nowhere, and a missing or truncated blob is listed under the blob
// line, in the text and in --json.
func TestInspectSaysWhatIsWrong(t *testing.T) {
	corrupt := filepath.Join("..", "..", "testdata", "corrupt")
	for _, c := range []struct {
		pack, text, json string
	}{
		{"future-version", "runs on: nothing (version 99 is neither the engine's 1-4 nor dgq's 1000)", `"runs_on": []`},
		{"truncated-blob", "    blob: blob is 20224 bytes, the tensors end at 40448", `"kind": "blob"`},
		{"missing-blob", "    blob: blob model.dgq.bin is missing", `"message": "blob model.dgq.bin is missing"`},
		{"good", "runs on: dgq, diffgemma", `"findings": []`},
	} {
		r := dgqRun("inspect", filepath.Join(corrupt, c.pack))
		if r.code != 0 || !strings.Contains(r.stdout, c.text) {
			t.Errorf("inspect %s: exit %d, no %q in\n%.600s", c.pack, r.code, c.text, r.stdout)
		}
		if c.pack != "good" && !strings.Contains(r.stdout, "rule violation") {
			t.Errorf("inspect %s does not count the violations", c.pack)
		}
		if r := dgqRun("inspect", "--json", filepath.Join(corrupt, c.pack)); r.code != 0 || !strings.Contains(r.stdout, c.json) {
			t.Errorf("inspect --json %s: exit %d, no %s", c.pack, r.code, c.json)
		}
	}
}

// TestTokenizeJSONWritesTokensAsTheyAre: <bos> is written as <bos>, not
// \u003cbos\u003e.
func TestTokenizeJSONWritesTokensAsTheyAre(t *testing.T) {
	r := dgqRun("tokenize", tiny(t), "a <b> & c", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"<bos>"`) || strings.Contains(r.stdout, `\u003c`) || strings.Contains(r.stdout, `\u0026`) {
		t.Errorf("tokenize --json: exit %d: %s", r.code, r.stdout)
	}
}

// TestDemoCleansUp: demo without -o leaves nothing in the temporary folder
// and says the pack was removed.
func TestDemoCleansUp(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := dgqRun("demo")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "the pack was made in a temporary folder and removed; give -o DIR to keep it\n") {
		t.Fatalf("demo: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("demo left %v in the temporary folder", left)
	}
}
