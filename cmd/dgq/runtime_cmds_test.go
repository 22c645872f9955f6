package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

func demoPack(t *testing.T, profile string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), profile)
	if r := dgqRun("demo", "--profile", profile, "-o", out); r.code != 0 {
		t.Fatalf("demo: %s", r.stderr)
	}
	return out
}

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

func TestRunIsDeterministic(t *testing.T) {
	pack := demoPack(t, "q4")
	a := dgqRun("run", pack, "--prompt", "Tell me about the sea", "--seed", "5")
	b := dgqRun("run", pack, "--prompt", "Tell me about the sea", "--seed", "5")
	if a.code != 0 || b.code != 0 || a.stdout != b.stdout || a.stdout == "" {
		t.Fatalf("run twice: %d %q / %d %q (%s)", a.code, a.stdout, b.code, b.stdout, a.stderr)
	}
	tr := dgqRun("run", pack, "--prompt", "Tell me about the sea", "--seed", "5", "--trace")
	if tr.stdout != a.stdout || !strings.Contains(tr.stderr, "accepted") || !strings.Contains(tr.stderr, "mean entropy") {
		t.Fatalf("--trace: %q %q", tr.stdout, tr.stderr)
	}
	assertOneLineError(t, dgqRun("run", pack), exitUsage, "--prompt")
}

func TestTokenizeMatchesReference(t *testing.T) {
	var ref struct {
		Cases []struct {
			Text           string `json:"text"`
			IDsWithSpecial []int  `json:"ids_with_special"`
		} `json:"cases"`
	}
	b, _ := testmodel.ReadReference("tokenizer_reference.json")
	json.Unmarshal(b, &ref)
	snap := tiny(t)
	for _, c := range ref.Cases {
		r := dgqRun("tokenize", snap, c.Text, "--json")
		var out struct {
			IDs []int `json:"ids"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
			t.Fatalf("tokenize %q: %d %s", c.Text, r.code, r.stderr)
		}
		if len(out.IDs) != len(c.IDsWithSpecial) {
			t.Fatalf("tokenize %q: %v, want %v", c.Text, out.IDs, c.IDsWithSpecial)
		}
		for i := range out.IDs {
			if out.IDs[i] != c.IDsWithSpecial[i] {
				t.Fatalf("tokenize %q: %v, want %v", c.Text, out.IDs, c.IDsWithSpecial)
			}
		}
	}
}

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

func TestBenchCommand(t *testing.T) {
	pack := demoPack(t, "q4")
	r := dgqRun("bench", pack, "--prompt-len", "9", "--reps", "2", "--json")
	var rep struct {
		Backend string `json:"backend"`
		Layers  int    `json:"layers"`
		Timings []struct {
			What   string    `json:"what"`
			Tokens int       `json:"tokens"`
			Ms     []float64 `json:"ms"`
			Median float64   `json:"ms_median"`
		} `json:"timings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("bench --json: exit %d, %v, %s %s", r.code, err, r.stdout, r.stderr)
	}
	if rep.Backend != "cpu" || rep.Layers < 1 || len(rep.Timings) != 2 || rep.Timings[0].What != "prefill" || rep.Timings[0].Tokens != 9 || rep.Timings[1].What != "denoise_step" {
		t.Fatalf("bench report %+v", rep)
	}
	for _, tm := range rep.Timings {
		if len(tm.Ms) != 2 || !(tm.Median > 0) {
			t.Errorf("%s: %d repetitions, median %g", tm.What, len(tm.Ms), tm.Median)
		}
	}
	assertOneLineError(t, dgqRun("bench", pack, "--reps", "0"), exitUsage, "--reps")
	assertOneLineError(t, dgqRun("bench", pack, "--backend", "metal"), exitUsage, "metal")
}
