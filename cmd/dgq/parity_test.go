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
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Pass {
		t.Fatalf("parity --json: exit %d, %v, %s %s", r.code, err, r.stdout, r.stderr)
	}
	names := map[string]bool{}
	for _, c := range rep.Cases {
		names[c.Name] = true
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
	r = dgqRun("parity", pack, "--reference", ref, "--json")
	var rep struct {
		Judged    bool   `json:"judged"`
		NoVerdict string `json:"no_verdict"`
		Cases     []struct {
			Tolerance *float64 `json:"tolerance"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitUsage || rep.Judged || rep.NoVerdict == "" {
		t.Fatalf("exit %d, %v: %s", r.code, err, r.stdout)
	}
	for _, c := range rep.Cases {
		if c.Tolerance != nil {
			t.Fatalf("a tolerance without a verdict: %s", r.stdout)
		}
	}
}
