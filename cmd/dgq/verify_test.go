package main

import (
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/check"
)

// small keeps a verify run short on the tiny checkpoint.
var small = []string{"--windows", "2", "--prompt-len", "8", "--generations", "1", "--max-steps", "4"}

// verifyArgs is a verify command line: small first, so that a flag in args
// overrides it (the last value of a flag wins).
func verifyArgs(args ...string) []string {
	return append(append([]string{"verify"}, small...), args...)
}

func TestVerifyCommand(t *testing.T) {
	q4, bf16 := demoPack(t, "q4"), demoPack(t, "bf16")
	plot := filepath.Join(t.TempDir(), "chart.png")
	r := dgqRun(verifyArgs(q4, "--source", bf16, "--json", "--plot", plot)...)
	if r.code != 0 {
		t.Fatalf("verify --json: exit %d: %s", r.code, r.stderr)
	}
	// Every documented key is present (docs/cli.md, "dgq verify --json").
	var rep map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	hasKeys(t, "report", rep, "pack", "source", "source_kind", "backend", "precision", "text", "windows", "prefix", "canvas",
		"noise_rates", "seed", "positions", "non_finite", "kld", "top1_agreement", "accuracy", "per_noise", "layers", "generation", "notes", "plot",
		"convergence", "rounding_kld_mean", "kld_vs_rounding")
	hasKeys(t, "convergence", rep["convergence"], "source_steps_mean", "pack_steps_mean", "step_cost", "step_cost_ci95", "blocks",
		"source_steps", "pack_steps", "source_at_limit", "pack_at_limit")
	if rep["rounding_kld_mean"] != nil || rep["kld_vs_rounding"] != nil {
		t.Errorf("rounding %v, %v on the cpu backend", rep["rounding_kld_mean"], rep["kld_vs_rounding"])
	}
	hasKeys(t, "kld", rep["kld"], "mean", "p99", "p999", "max")
	hasKeys(t, "accuracy", rep["accuracy"], "source", "pack")
	hasKeys(t, "per_noise", rep["per_noise"].([]any)[0], "rate", "sc", "positions", "kld_mean", "kld_p99", "kld_max", "top1", "acc_source", "acc_pack")
	layers := rep["layers"].([]any)
	hasKeys(t, "layers", layers[1], "layer", "rel_err", "cosine", "router_agreement")
	if l0 := layers[0].(map[string]any); l0["router_agreement"] != nil {
		t.Errorf("layer 0 has a router agreement: %v", l0)
	}
	hasKeys(t, "generation", rep["generation"], "runs", "tokens", "identical", "token_agreement", "steps_per_block")
	hasKeys(t, "steps_per_block", rep["generation"].(map[string]any)["steps_per_block"], "source", "pack")
	if kld := rep["kld"].(map[string]any)["mean"].(float64); !(kld > 0) || rep["source_kind"] != "pack" || rep["text"] != "random" {
		t.Errorf("kld mean %v, source kind %v, text %v", kld, rep["source_kind"], rep["text"])
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() != check.PlotWidth || img.Bounds().Dy() != check.PlotHeight {
		t.Fatalf("plot: %v", err)
	}

	// The text report, a bf16 pack against itself: KLD 0, agreement 1.
	r = dgqRun(verifyArgs(bf16, "--source", bf16, "--generations", "0")...)
	if r.code != 0 || !strings.Contains(r.stdout, "KLD(source‖pack): mean 0  p99 0  p99.9 0  max 0") ||
		!strings.Contains(r.stdout, "top-1 agreement 1.0000") || strings.Contains(r.stdout, "generations:") ||
		strings.Contains(r.stdout, "convergence:") {
		t.Fatalf("text report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// With generations, the convergence line: step cost exactly 1.
	r = dgqRun(verifyArgs(bf16, "--source", bf16)...)
	if r.code != 0 || !strings.Contains(r.stdout, "convergence: ") || !strings.Contains(r.stdout, "step cost 1.000 (95% CI 1.000–1.000)") {
		t.Fatalf("text report with generations: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func hasKeys(t *testing.T, what string, v any, keys ...string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object: %v", what, v)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q", what, k)
		}
	}
}

func TestVerifyCommandErrors(t *testing.T) {
	q4 := demoPack(t, "q4")
	home := t.TempDir() // an empty hub cache
	for _, k := range []string{hfcache.EnvDGQHFHome, hfcache.EnvHFHubCache, hfcache.EnvHFHubCacheLegacy} {
		t.Setenv(k, "")
	}
	t.Setenv(hfcache.EnvHFHome, home)
	dir := t.TempDir()
	cases := []struct {
		name    string
		args    []string
		code    int
		mention string
	}{
		// demo removes its snapshot: the recorded source is gone.
		{"recorded source gone", verifyArgs(q4), exitUsage, "--source"},
		{"source not cached", verifyArgs(q4, "--source", "dgq-test/diffusiongemma-tiny@main"), exitStale, "dgq download dgq-test/diffusiongemma-tiny"},
		{"quantized source", verifyArgs(q4, "--source", q4), exitUsage, "bf16"},
		{"noise rate", verifyArgs(q4, "--source", q4, "--noise-rates", "0,0.5"), exitUsage, "noise rate 0"},
		{"negative generations", verifyArgs(q4, "--generations", "-1"), exitUsage, "--generations"},
		{"plot extension", verifyArgs(q4, "--source", q4, "--plot", filepath.Join(dir, "chart.svg")), exitUsage, ".png"},
		{"plot in the cache", verifyArgs(q4, "--source", q4, "--plot", filepath.Join(home, "hub", "x.png")), exitUsage, "--plot"},
		{"backend", verifyArgs(q4, "--backend", "tpu"), exitUsage, "tpu"},
		{"no pack", []string{"verify"}, exitUsage, "verify"},
		{"not a pack", verifyArgs(dir), exitInvalid, "not a dgq pack"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertOneLineError(t, dgqRun(c.args...), c.code, c.mention)
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("verify wrote %v", entries)
			}
		})
	}
	// --json failures print the error object.
	r := dgqRun(verifyArgs(q4, "--json")...)
	var obj jsonError
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj.Error.Code != exitUsage || obj.Error.Kind != "usage" {
		t.Errorf("--json error: %q (%v)", r.stdout, err)
	}
}

// The exit code of each verify sentinel, alone and as Verify wraps it.
func TestVerifyExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{check.ErrNoSource, exitUsage},
		{fmt.Errorf("%w: the pack's source x@y: %w", check.ErrNoSource, hfcache.ErrNotInCache), exitStale},
		{fmt.Errorf("%w: gone: %w", check.ErrNoSource, hfcache.ErrMissingFile), exitUsage},
		{check.ErrSourceMismatch, exitUsage},
		{check.ErrVerifyOptions, exitUsage},
		{check.ErrText, exitInvalid},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
