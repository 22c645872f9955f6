package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/selftest"
)

// dgq selftest: the CPU backend passes (text and JSON, exit 0); backend
// metal off macOS exits 6 with the reason in one line, and with --json
// still prints the environment; usage errors exit 2.
func TestSelftest(t *testing.T) {
	r := dgqRun("selftest", "--backend", "cpu", "--quick")
	if r.code != exitOK || !strings.Contains(r.stdout, "selftest: pass") || !strings.Contains(r.stdout, "conformance  ok") || r.stderr != "" {
		t.Errorf("selftest --backend cpu --quick: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = dgqRun("selftest", "--quick", "--json")
	var rep selftest.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitOK || !rep.Pass || rep.Backend.Name != "cpu" ||
		len(rep.Parts) != 3 {
		t.Errorf("selftest --json: exit %d, %v, %+v", r.code, err, rep)
	}
	var verdicts struct {
		Pass   *bool `json:"pass"`
		Judged bool  `json:"judged"`
		Parts  []struct {
			Pass   *bool `json:"pass"`
			Judged bool  `json:"judged"`
			Parity []struct {
				Pass  *bool `json:"pass"`
				Cases []struct {
					Pass   *bool `json:"pass"`
					Judged bool  `json:"judged"`
				} `json:"cases"`
			} `json:"parity"`
		} `json:"parts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &verdicts); err != nil || verdicts.Pass == nil || !*verdicts.Pass || !verdicts.Judged {
		t.Errorf("selftest --json: the verdict is not a judged pass: %v", err)
	}
	for _, p := range verdicts.Parts {
		if p.Pass == nil || !*p.Pass || !p.Judged {
			t.Errorf("a passing part is not a judged pass: %+v", p)
		}
		for _, pr := range p.Parity {
			for _, c := range pr.Cases {
				if pr.Pass == nil || c.Pass == nil || !*c.Pass || !c.Judged {
					t.Errorf("a bf16 parity case is not a judged pass")
				}
			}
		}
	}

	assertOneLineError(t, dgqRun("selftest", "--backend", "nope"), exitUsage, "(valid: cpu, cuda, metal)")
	assertOneLineError(t, dgqRun("selftest", "--precision", "bf16"), exitUsage, "needs a GPU backend")
	assertOneLineError(t, dgqRun("selftest", "extra"), exitUsage, `unexpected argument "extra"`)
	if runtime.GOOS == "darwin" {
		t.Skip("on macOS backend metal runs: dgq selftest --backend metal is the Mac's first command (docs/metal.md)")
	}
	mention := "backend unavailable: metal unavailable: needs macOS on Apple silicon"
	assertOneLineError(t, dgqRun("selftest", "--backend", "metal"), exitBackend, mention)
	r = dgqRun("selftest", "--backend", "metal", "--json")
	rep = selftest.Report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitBackend || rep.Backend.Available ||
		!strings.Contains(rep.Backend.Reason, mention) || rep.Environment.OS != runtime.GOOS || rep.Pass {
		t.Errorf("selftest --backend metal --json: exit %d, %v, %q", r.code, err, r.stdout)
	}
	// Issue 21: a backend that cannot run gives no verdict: pass null, not
	// false (no part failed: none ran).
	if !strings.Contains(r.stdout, `"pass": null`) || !strings.Contains(r.stdout, `"judged": false`) {
		t.Errorf("selftest without a verdict does not say pass null, judged false: %s", r.stdout)
	}
	assertOneLineError(t, r, exitBackend, mention)
}
