package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/overlay"
)

// The corrupt-pack corpus (testdata/corrupt, made by dgq/internal/corruptgen):
// every damaged pack is refused by the loader and audit reports each of its
// faults, with a non-zero exit; inspect never crashes on any of them.
func TestCorruptCorpus(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "corrupt")
	t.Setenv("DGQ_HF_HOME", filepath.Join(root, "hub"))
	data, err := os.ReadFile(filepath.Join(root, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]struct {
		Kinds  []string `json:"kinds"`
		Tensor string   `json:"tensor"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 14 {
		t.Fatalf("corpus has %d cases", len(cases))
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			r := dgqRun("audit", "--json", dir)
			var rep struct {
				OK       bool `json:"ok"`
				Findings []struct {
					Tensor, Kind, Message string
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("audit --json output %q: %v", r.stdout, err)
			}
			p, openErr := overlay.Open(dir)
			if p != nil {
				p.Close()
			}
			if len(want.Kinds) == 0 {
				if r.code != 0 || !rep.OK || openErr != nil {
					t.Fatalf("good pack: exit %d, findings %v, open %v", r.code, rep.Findings, openErr)
				}
				return
			}
			if r.code == 0 || rep.OK {
				t.Fatalf("audit passed a damaged pack (exit %d)", r.code)
			}
			if openErr == nil {
				t.Fatal("the loader accepted a damaged pack")
			}
			kinds := map[string]bool{}
			named := false
			for _, f := range rep.Findings {
				kinds[f.Kind] = true
				named = named || (want.Tensor != "" && f.Tensor == want.Tensor)
			}
			for _, k := range want.Kinds {
				if !kinds[k] {
					t.Errorf("no %q finding in %+v", k, rep.Findings)
				}
			}
			if want.Tensor != "" && !named {
				t.Errorf("no finding names %s: %+v", want.Tensor, rep.Findings)
			}
			if kinds["stale"] && !strings.Contains(r.stdout, "dgq download dgq-test/corrupt-base") {
				t.Errorf("stale finding without the fix command: %s", r.stdout)
			}
			ir := dgqRun("inspect", "--json", dir)
			if strings.Contains(ir.stderr, "panic") || (ir.code != 0 && ir.code != exitInvalid) {
				t.Errorf("inspect: exit %d, stderr %q", ir.code, ir.stderr)
			}
		})
	}
}
