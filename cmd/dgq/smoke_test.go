package main

import (
	"encoding/json"
	"testing"
)

func TestSmokeCommand(t *testing.T) {
	pack := demoPack(t, "bf16")
	r := dgqRun("smoke", pack, "--json")
	var rep struct {
		Pass   bool `json:"pass"`
		Checks []struct {
			Name    string `json:"name"`
			Pass    bool   `json:"pass"`
			Skipped bool   `json:"skipped"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Pass {
		t.Fatalf("smoke: %d %v %s %s", r.code, err, r.stdout, r.stderr)
	}
	for _, c := range rep.Checks {
		if c.Name == "parity" && (c.Skipped || !c.Pass) {
			t.Fatal("smoke did not find the embedded checkpoint's reference")
		}
	}
}
