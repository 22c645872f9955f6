package selftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/model"
)

// ErrSelftest: the self-test could not prepare its work (its directory, the
// embedded checkpoint written into it: an I/O failure); a part that fails
// is a report, not this error.
var ErrSelftest = errclass.New(errclass.IO, "selftest: cannot prepare its work directory")

// Options configures Run.
type Options struct {
	// Backend names the backend to prove (backend.Open): "" is "cpu".
	Backend string
	// Precision is its arithmetic: "" or "f32", or "bf16".
	Precision string
	// Quick runs a subset that finishes in under a minute on a GPU: the
	// conformance suite's small shapes (conformance.Options.Small), the
	// bf16 pack's parity only, one generation in lockstep.
	Quick bool
	// Workers is the CPU backend's goroutines (0: all cores; at most
	// limits.WorkerCap, negative refused).
	Workers int
	// TempDir is where the work directory (the embedded checkpoint, its
	// packs) is made and removed; "" is os.TempDir().
	TempDir string
	// Progress, when not nil, is told each part as it runs (its phase, its
	// steps).
	Progress dgq.Progress
}

// Report is what Run found: the JSON a user sends back (dgq selftest
// --json).
type Report struct {
	// Pass is true when parts ran and every part passed (each with a
	// verdict). Its JSON is null, with "judged" false, when there is no
	// verdict (Judged).
	Pass        bool        `json:"pass"`
	Backend     BackendInfo `json:"backend"`
	Environment Environment `json:"environment"`
	Build       Build       `json:"dgq"`
	Quick       bool        `json:"quick"`
	// Parts are the checks run, in order; each passed or failed.
	Parts          []Part  `json:"parts"`
	ElapsedSeconds float64 `json:"elapsed_s"`
}

// BackendInfo is the backend under test.
type BackendInfo struct {
	Name      string `json:"name"`
	Precision string `json:"precision"`
	// Available: the backend opened. When not, Reason says why (the one-line
	// error) and no part ran.
	Available bool                `json:"available"`
	Reason    string              `json:"reason,omitempty"`
	Device    *backend.DeviceInfo `json:"device,omitempty"`
	// Kernels is the backend's choice per op (Caps().Kernels).
	Kernels map[string]string `json:"kernels,omitempty"`
	// Numerics is what the backend says its arithmetic may do
	// (Caps().Numerics): the conformance suite's bounds follow from it.
	Numerics *backend.Numerics `json:"numerics,omitempty"`
}

// Part is one check of the report.
type Part struct {
	// Name is "conformance", "kernels", "arithmetic", "parity" or
	// "lockstep".
	Name string `json:"name"`
	// Pass is true only for a part that gave a verdict and passed; its JSON
	// is null, with "judged" false, when the part gave none (NoVerdict).
	Pass           bool    `json:"pass"`
	Summary        string  `json:"summary"`
	ElapsedSeconds float64 `json:"elapsed_s"`
	// Failures lists what failed, one line each (the first few of each
	// failed test).
	Failures []string `json:"failures,omitempty"`
	// NoVerdict says why the part could give no verdict (nothing failed,
	// nothing was proven); empty when it gave one.
	NoVerdict string `json:"no_verdict,omitempty"`
	// The part's own results: one of these is set.
	Conformance *ConformanceResult    `json:"conformance,omitempty"`
	Kernels     *backend.KernelReport `json:"kernels,omitempty"`
	Arithmetic  *backend.Arithmetic   `json:"arithmetic,omitempty"`
	Parity      []ParityResult        `json:"parity,omitempty"`
	Lockstep    []LockstepResult      `json:"lockstep,omitempty"`
}

// Judged reports that the part gave a verdict.
func (p Part) Judged() bool { return p.NoVerdict == "" }

// MarshalJSON writes the part with "pass" null when it gave no verdict, and
// "judged".
func (p Part) MarshalJSON() ([]byte, error) {
	type plain Part // without this method
	return json.Marshal(struct {
		Name   string `json:"name"`
		Pass   *bool  `json:"pass"`
		Judged bool   `json:"judged"`
		plain
	}{p.Name, verdictOf(p.Pass, p.Judged()), p.Judged(), plain(p)})
}

// Judged reports that the run has a verdict: parts ran, and one failed or
// every one gave a verdict. Without one (the backend did not open, or a
// part could not judge and none failed) Pass is false and means nothing.
func (r Report) Judged() bool {
	if len(r.Parts) == 0 {
		return false
	}
	all := true
	for _, p := range r.Parts {
		if p.Judged() && !p.Pass {
			return true
		}
		all = all && p.Judged()
	}
	return all
}

// MarshalJSON writes the report with "pass" null when it has no verdict,
// and "judged".
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report // without this method
	return json.Marshal(struct {
		Pass   *bool `json:"pass"`
		Judged bool  `json:"judged"`
		plain
	}{verdictOf(r.Pass, r.Judged()), r.Judged(), plain(r)})
}

// verdictOf is a verdict as JSON: pass when judged, else null.
func verdictOf(pass, judged bool) *bool {
	if !judged {
		return nil
	}
	return &pass
}

// Run proves the backend o names on this machine (the package comment lists
// the parts) and returns the report. When the backend cannot be opened it
// returns the report (the environment, Backend.Reason) with the error,
// which wraps backend.ErrUnavailable or backend.ErrUnknown; an error
// without a report is a failure to run at all, or ctx's.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := limits.Workers("--workers", o.Workers); err != nil {
		return nil, err // before anything runs
	}
	start := time.Now()
	if o.Backend == "" {
		o.Backend = "cpu"
	}
	if o.Precision == "" {
		o.Precision = backend.F32
	}
	rep := &Report{Environment: collectEnvironment(ctx), Build: ReadBuild(), Quick: o.Quick, Parts: []Part{}}
	defer func() { rep.ElapsedSeconds = time.Since(start).Seconds() }()
	b, info, err := openBackend(ctx, o.Backend, backend.Config{Precision: o.Precision, Workers: o.Workers})
	rep.Backend = info
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, err
		}
		return rep, err
	}
	defer b.Close()
	work, err := os.MkdirTemp(o.TempDir, "dgq-selftest-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSelftest, err)
	}
	defer os.RemoveAll(work)
	r := &runner{o: o, b: b, work: work, progress: o.Progress}
	if r.progress == nil {
		r.progress = nopProgress{}
	}
	for _, part := range r.parts() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		p, err := part(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrSelftest) {
				return nil, err
			}
			p.Pass, p.NoVerdict, p.Failures = false, "", append(p.Failures, oneLine(err.Error()))
			if p.Summary == "" {
				p.Summary = "could not run: " + oneLine(err.Error())
			}
		}
		p.ElapsedSeconds = time.Since(t0).Seconds()
		rep.Parts = append(rep.Parts, p)
	}
	rep.Pass = len(rep.Parts) > 0
	for _, p := range rep.Parts {
		rep.Pass = rep.Pass && p.Pass
	}
	return rep, nil
}

// runner holds what the parts share.
type runner struct {
	o        Options
	b        backend.Backend
	work     string
	progress dgq.Progress
	ref      string // the embedded reference's directory, once written
	snap     string // the embedded snapshot's directory, once written
}

// parts lists the parts the backend offers, in order.
func (r *runner) parts() []func(context.Context) (Part, error) {
	ps := []func(context.Context) (Part, error){r.conformance}
	if _, ok := r.b.(backend.KernelReporter); ok {
		ps = append(ps, r.kernels)
	}
	if _, ok := r.b.(backend.ArithmeticProber); ok {
		ps = append(ps, r.arithmetic)
	}
	return append(ps, r.parity, r.lockstep)
}

// checkpoint writes the embedded checkpoint and its reference into the
// work directory (once).
func (r *runner) checkpoint() error {
	if r.snap != "" {
		return nil
	}
	snap, ref := filepath.Join(r.work, "snapshot"), filepath.Join(r.work, "reference")
	if _, err := testmodel.WriteSnapshot(snap); err != nil {
		return fmt.Errorf("%w: %w", ErrSelftest, err)
	}
	if err := testmodel.WriteReference(ref); err != nil {
		return fmt.Errorf("%w: %w", ErrSelftest, err)
	}
	r.snap, r.ref = snap, ref
	return nil
}

// pack quantizes the embedded checkpoint with profile and binds it.
func (r *runner) pack(ctx context.Context, profile string) (*model.Model, func(), error) {
	if err := r.checkpoint(); err != nil {
		return nil, nil, err
	}
	out := filepath.Join(r.work, "pack-"+profile)
	if _, err := os.Stat(out); err != nil {
		if _, err := dgq.Quantize(ctx, dgq.QuantizeOptions{Source: r.snap, Out: out, Profile: profile}); err != nil {
			return nil, nil, fmt.Errorf("quantizing the embedded checkpoint (%s): %w", profile, err)
		}
	}
	pk, err := dgq.Open(out)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.Bind(model.PackWeights(pk))
	if err != nil {
		pk.Close()
		return nil, nil, err
	}
	return m, func() { pk.Close() }, nil
}

// engine is an Engine of the embedded checkpoint's pack of profile on the
// backend; done closes both.
func (r *runner) engine(ctx context.Context, profile string) (*model.Engine, func(), error) {
	m, closePack, err := r.pack(ctx, profile)
	if err != nil {
		return nil, nil, err
	}
	e, err := model.NewEngine(m, r.b)
	if err != nil {
		closePack()
		return nil, nil, err
	}
	return e, func() { e.Close(); closePack() }, nil
}

type nopProgress struct{}

func (nopProgress) Start(string, int64) {}
func (nopProgress) Add(int64)           {}
func (nopProgress) Finish()             {}
