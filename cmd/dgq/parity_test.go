package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestParityCommand(t *testing.T) {
	pack := demoPack(t, "bf16")
	ref := filepath.Join("..", "..", "dgq", "testmodel", "tiny", "reference", "reference.safetensors")
	r := dgqRun("parity", pack, "--reference", ref, "--json")
	var rep struct {
		Pass  bool `json:"pass"`
		Cases []struct {
			Name        string   `json:"name"`
			MaxAbsErr   *float64 `json:"max_abs_err"`
			MeanAbsErr  *float64 `json:"mean_abs_err"`
			Cosine      *float64 `json:"cosine"`
			ArgmaxAgree *float64 `json:"argmax_agree"`
			Pass        *bool    `json:"pass"`
			Judged      bool     `json:"judged"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Pass {
		t.Fatalf("parity --json: exit %d, %v, %s %s", r.code, err, r.stdout, r.stderr)
	}
	names := map[string]bool{}
	for _, c := range rep.Cases {
		names[c.Name] = true
		if c.Pass == nil || !*c.Pass || !c.Judged {
			t.Errorf("case %s of a judged pass: pass %v, judged %v", c.Name, c.Pass, c.Judged)
		}
		if c.MaxAbsErr == nil || c.MeanAbsErr == nil || c.Cosine == nil || c.ArgmaxAgree == nil {
			t.Errorf("case %s lacks a key", c.Name)
		}
	}
	for _, n := range []string{"logits1", "logits2", "logits3", "prefill_last_hidden", "step1_accept_mask"} {
		if !names[n] {
			t.Errorf("no case %s", n)
		}
	}
	// Without a GPU, --backend cuda fails at once with one line and code 6
	// (with one, parity passes there too).
	if r := dgqRun("parity", pack, "--reference", ref, "--backend", "cuda"); r.code != 0 {
		assertOneLineError(t, r, exitBackend, "cuda unavailable")
	}
	assertOneLineError(t, dgqRun("parity", pack, "--reference", ref, "--backend", "tpu"), exitUsage, "tpu")
	assertOneLineError(t, dgqRun("parity", pack, "--reference", ref, "--precision", "bf16"), exitUsage, "--backend cuda")
	assertOneLineError(t, dgqRun("parity", pack, "--reference", ref, "--backend", "cuda", "--precision", "fp8"), exitUsage, "fp8")
	assertOneLineError(t, dgqRun("parity", pack), exitUsage, "--reference")
}

// A q4 pack against the reference of its bf16 source: the table is printed,
// the verdict refused with a pointer to dgq verify, exit 2; in JSON, judged
// is false and no case carries a tolerance.
func TestParityNoVerdict(t *testing.T) {
	pack := demoPack(t, "q4")
	ref := filepath.Join("..", "..", "dgq", "testmodel", "tiny", "reference", "reference.safetensors")
	r := dgqRun("parity", pack, "--reference", ref)
	if r.code != exitUsage || !strings.Contains(r.stdout, "no verdict") || !strings.Contains(r.stderr, "dgq verify") ||
		strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	// Issue 21: no row says ok without a verdict; each shows "-".
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[0], "logits") && f[len(f)-1] != "-" {
			t.Errorf("row without a verdict does not end in -: %q", l)
		}
	}
	if strings.Contains(r.stdout, " ok") {
		t.Errorf("a table without a verdict says ok:\n%s", r.stdout)
	}
	r = dgqRun("parity", pack, "--reference", ref, "--json")
	var rep struct {
		Pass      *bool  `json:"pass"`
		Judged    *bool  `json:"judged"`
		NoVerdict string `json:"no_verdict"`
		Cases     []struct {
			Tolerance *float64 `json:"tolerance"`
			Pass      *bool    `json:"pass"`
			Judged    *bool    `json:"judged"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitUsage || rep.Judged == nil || *rep.Judged || rep.NoVerdict == "" {
		t.Fatalf("exit %d, %v: %s", r.code, err, r.stdout)
	}
	// Issue 21: "pass" is null, not true, without a verdict — the report's
	// and every case's.
	if rep.Pass != nil || !strings.Contains(r.stdout, `"pass": null`) {
		t.Errorf("pass without a verdict is %v, want null: %s", rep.Pass, r.stdout)
	}
	for _, c := range rep.Cases {
		if c.Tolerance != nil {
			t.Fatalf("a tolerance without a verdict: %s", r.stdout)
		}
		if c.Pass != nil || c.Judged == nil || *c.Judged {
			t.Fatalf("a case without a verdict says pass %v, judged %v: %s", c.Pass, c.Judged, r.stdout)
		}
	}
}
