package main

import (
	"encoding/json"
	"testing"
)

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
	assertOneLineError(t, dgqRun("bench", pack, "--backend", "tpu"), exitUsage, "tpu")
}
