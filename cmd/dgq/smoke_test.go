package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/hfcache"
)

// smokeJSON is the part of smoke --json the tests read.
type smokeJSON struct {
	Pass   bool `json:"pass"`
	Checks []struct {
		Name    string `json:"name"`
		Pass    bool   `json:"pass"`
		Skipped bool   `json:"skipped"`
		Detail  string `json:"detail"`
	} `json:"checks"`
}

func TestSmokeCommand(t *testing.T) {
	pack := demoPack(t, "bf16")
	r := dgqRun("smoke", pack, "--json")
	var rep smokeJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Pass {
		t.Fatalf("smoke: %d %v %s %s", r.code, err, r.stdout, r.stderr)
	}
	for _, c := range rep.Checks {
		if c.Name == "parity" && (c.Skipped || !c.Pass) {
			t.Fatal("smoke did not find the embedded checkpoint's reference")
		}
	}
}

// With the bf16 source at hand (in the hub cache, where the pack records
// it), smoke verifies the pack against it: a q4 pack gets no parity verdict
// (skipped, pointing at verify) and a finite verify; a bf16 pack computes
// its source exactly (KLD 0).
func TestSmokeVerifiesAgainstTheSource(t *testing.T) {
	hub := filepath.Join(t.TempDir(), "hub")
	if _, err := testmodel.WriteHubCache(hub); err != nil {
		t.Fatal(err)
	}
	t.Setenv(hfcache.EnvDGQHFHome, hub)
	src := testmodel.HubInfo().Repo
	for _, profile := range []string{"q4", "bf16"} {
		pack := filepath.Join(t.TempDir(), profile)
		if r := dgqRun("quantize", "--profile", profile, "-m", src, "-o", pack); r.code != 0 {
			t.Fatalf("quantize: %s", r.stderr)
		}
		r := dgqRun("smoke", pack, "--json")
		var rep smokeJSON
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Pass {
			t.Fatalf("%s: smoke: %d %v %s %s", profile, r.code, err, r.stdout, r.stderr)
		}
		got := map[string]string{}
		for _, c := range rep.Checks {
			got[c.Name] = fmt.Sprintf("pass=%v skipped=%v %s", c.Pass, c.Skipped, c.Detail)
			if c.Name == "verify" && (!c.Pass || !strings.Contains(c.Detail, "KLD")) {
				t.Errorf("%s: verify check: %s", profile, got[c.Name])
			}
			if c.Name == "parity" && profile == "q4" && (!c.Skipped || !strings.Contains(c.Detail, "dgq verify")) {
				t.Errorf("q4: parity check: %s", got[c.Name])
			}
		}
		// Issue 21: a skipped check has no verdict: "pass": null and
		// "judged": false; the checks that ran are judged.
		var verdicts struct {
			Checks []struct {
				Name    string `json:"name"`
				Pass    *bool  `json:"pass"`
				Judged  *bool  `json:"judged"`
				Skipped bool   `json:"skipped"`
			} `json:"checks"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &verdicts); err != nil {
			t.Fatal(err)
		}
		for _, c := range verdicts.Checks {
			if c.Judged == nil || *c.Judged == c.Skipped || (c.Pass == nil) != c.Skipped {
				t.Errorf("%s: check %s: pass %v, judged %v, skipped %v", profile, c.Name, c.Pass, c.Judged, c.Skipped)
			}
		}
		if _, ok := got["verify"]; !ok {
			t.Errorf("%s: no verify check: %v", profile, got)
		}
	}
}
