package selftest

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// brokenBackend is the CPU backend with one op wrong: Softcap off by a
// relative 1e-5, far beyond its bound and far below anything a model-level
// check sees on its own.
type brokenBackend struct{ *cpu.Backend }

func (b brokenBackend) Name() string { return "selftest-broken" }

func (b brokenBackend) Softcap(x backend.Buf, n int, c float32) error {
	if err := b.Backend.Softcap(x, n, c); err != nil {
		return err
	}
	v := make([]float32, n)
	if err := b.Download(x, v); err != nil {
		return err
	}
	for i := range v {
		v[i] *= 1 + 1e-5
	}
	return b.Upload(x, v)
}

// unavailable is a backend that cannot run here.
var errNoDevice = errors.New("no such device here")

func init() {
	backend.Register("selftest-broken", func(c backend.Config) (backend.Backend, error) {
		return brokenBackend{cpu.New(c.Workers)}, nil
	})
	backend.Register("selftest-absent", func(backend.Config) (backend.Backend, error) {
		return nil, errors.Join(backend.ErrUnavailable, errNoDevice)
	})
}

// TestRunCPU: the quick self-test of the CPU backend passes, with the parts
// the CPU backend offers (it compiles no kernels and has no probe), the
// environment and the build described, and every part in the JSON report.
func TestRunCPU(t *testing.T) {
	r, err := Run(context.Background(), Options{Backend: "cpu", Quick: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range r.Parts {
		names = append(names, p.Name)
		if !p.Pass || p.Summary == "" || len(p.Failures) != 0 {
			t.Errorf("part %+v", p)
		}
	}
	if got := strings.Join(names, ","); got != "conformance,parity,lockstep" {
		t.Errorf("parts %s", got)
	}
	if !r.Pass || !r.Backend.Available || r.Backend.Numerics == nil || *r.Backend.Numerics != cpu.Numerics {
		t.Errorf("report %+v", r)
	}
	if r.Environment.OS == "" || r.Environment.CPUs < 1 || r.Build.Version == "" || r.Build.GoVersion == "" {
		t.Errorf("environment %+v, build %+v", r.Environment, r.Build)
	}
	if c := r.Parts[0].Conformance; c == nil || c.Tests < 50 || c.Failed != 0 || !c.Small {
		t.Errorf("conformance %+v", c)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"pass":true`, `"environment"`, `"dgq"`, `"parts"`, `"conformance"`, `"lockstep"`, `"flush_subnormals"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

// TestRunFindsABrokenOp: a backend whose Softcap is off by 1e-5 fails the
// conformance part, which names the op; the report fails.
func TestRunFindsABrokenOp(t *testing.T) {
	r, err := Run(context.Background(), Options{Backend: "selftest-broken", Quick: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Pass || r.Parts[0].Name != "conformance" || r.Parts[0].Pass {
		t.Fatalf("a broken Softcap passed: %+v", r.Parts)
	}
	if c := r.Parts[0].Conformance; c.Failed == 0 || len(r.Parts[0].Failures) == 0 || !strings.Contains(r.Parts[0].Failures[0], "Softcap") {
		t.Errorf("conformance %+v, failures %q", c, r.Parts[0].Failures)
	}
}

// TestRunUnavailable: a backend that cannot run here gives the report of
// the environment with the reason, and the error (backend.ErrUnavailable:
// exit code 6 in cmd/dgq); an unknown one backend.ErrUnknown.
func TestRunUnavailable(t *testing.T) {
	r, err := Run(context.Background(), Options{Backend: "selftest-absent", TempDir: t.TempDir()})
	if !errors.Is(err, backend.ErrUnavailable) || r == nil || r.Backend.Available || !strings.Contains(r.Backend.Reason, "no such device") ||
		r.Pass || len(r.Parts) != 0 || r.Environment.OS == "" {
		t.Errorf("Run = %+v, %v", r, err)
	}
	if _, err := Run(context.Background(), Options{Backend: "nope"}); !errors.Is(err, backend.ErrUnknown) {
		t.Errorf("unknown backend: %v", err)
	}
}

// TestRunCanceled: a canceled context stops the run with its error.
func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Backend: "cpu", Quick: true, TempDir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run(canceled) = %v", err)
	}
}

// A parity case whose error is not a number (a NaN in the backend's output,
// a tensor of the wrong length) must still encode: JSON has no NaN or
// infinity, so the report would be lost exactly when it matters.
func TestParityCaseEncodesNonFinite(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0.5} {
		c := ParityCase{Name: "logits1", MaxAbsErr: finite(v), VsCPU: finite(v)}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		want := !math.IsNaN(v) && !math.IsInf(v, 0)
		if got := c.MaxAbsErr != nil; got != want || strings.Contains(string(b), "NaN") {
			t.Errorf("%v: %s", v, b)
		}
	}
}
