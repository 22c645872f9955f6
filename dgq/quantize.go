package dgq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq/limits"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

// Version is the dgq version recorded in manifests.
const Version = "0.1.0-dev"

// QuantizeOptions configures Quantize.
type QuantizeOptions struct {
	Source     string        // snapshot directory, or ORG/NAME[@REVISION] in the Hugging Face cache
	Out        string        // pack directory to create
	Profile    string        // bf16, q4, q5, q6, nvfp4, nvfp4x
	Sets       []string      // --set class=format overrides, in order
	DryRun     bool          // plan only: no output is written
	ReportPath string        // write a per-tensor error report (JSON) here
	Force      bool          // replace an existing pack at Out
	Overlay    bool          // write a layered pack: raw tensors reference the source shards
	Encoder    codecs.Method // Search (default) or MinMax (the engine's own encoders, byte for byte)
	// Imatrix is an importance-matrix file (dgq calibrate) whose column
	// weights the searching encoder minimizes the weighted error with.
	Imatrix  string
	Workers  int // encoding goroutines; 0 = GOMAXPROCS; at most limits.WorkerCap
	Progress Progress
}

// QuantizeResult describes what Quantize did (or, for a dry run, would do).
type QuantizeResult struct {
	Plan        *layout.Plan
	Summary     []layout.ClassSummary
	Manifest    *Manifest // nil for a dry run
	Report      *Report   // nil for a dry run
	SourceBytes int64
	Elapsed     time.Duration
	// RemovedStaging lists the staging folders of killed runs (of any
	// output) that were removed from the output's parent folder.
	RemovedStaging []string
}

// Quantize turns a Hugging Face snapshot into a self-contained pack in one
// streaming pass. Every decision and every refusal (bad policy, bad config,
// missing or unexpected tensors, shapes a format cannot hold) happens before
// the output exists; the pack is published atomically at the end.
func Quantize(ctx context.Context, opts QuantizeOptions) (*QuantizeResult, error) {
	if err := limits.First(ErrUsage, limits.Workers("--workers", opts.Workers)); err != nil {
		return nil, err
	}
	start := time.Now()
	policy, err := layout.NewPolicy(opts.Profile, opts.Sets)
	if err != nil {
		return nil, err
	}
	if opts.DryRun && opts.ReportPath != "" {
		return nil, fmt.Errorf("%w: --report needs an actual run; drop --dry-run or --report", ErrUsage)
	}
	if !opts.DryRun {
		if err := CheckOutput(opts.Out, opts.Force); err != nil {
			return nil, err
		}
	}
	inv, err := takeInventory(opts.Source)
	if err != nil {
		return nil, err
	}
	defer inv.snap.Close()
	if !opts.DryRun {
		if err := CheckOutputPlacement(inv.source.Path, opts.Out); err != nil {
			return nil, err
		}
	}
	if opts.ReportPath != "" {
		if err := CheckReportPath(opts.ReportPath, inv.source.Path, opts.Out); err != nil {
			return nil, err
		}
		if err := checkReportReplace(opts.ReportPath, opts.Force); err != nil {
			return nil, err
		}
	}
	plan, err := layout.MakePlan(policy, inv.tensors)
	if err != nil {
		return nil, err
	}
	var im *Imatrix
	if opts.Imatrix != "" {
		if opts.Encoder != codecs.Search {
			return nil, fmt.Errorf("%w: --imatrix weights the searching encoder; --encoder %s reproduces the engine's bytes and takes none (drop one of them)", ErrUsage, opts.Encoder)
		}
		if im, err = ReadImatrix(opts.Imatrix); err != nil {
			return nil, err
		}
		if err := im.check(plan); err != nil {
			return nil, err
		}
	}
	var em *overlayEmitter
	if opts.Overlay {
		if em, err = newOverlayEmitter(plan, inv); err != nil {
			return nil, err
		}
	}
	res := &QuantizeResult{Plan: plan, Summary: plan.Summary(), SourceBytes: inv.bytes}
	if opts.DryRun {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	m, stats, err := writePack(ctx, opts, plan, inv, em, im, res)
	if err != nil {
		return nil, err
	}
	res.Manifest = m
	res.Report = newReport(plan, stats)
	if im != nil {
		res.Report.Imatrix = im.Ref()
	}
	if opts.ReportPath != "" {
		if err := res.Report.writeFile(opts.ReportPath); err != nil {
			return nil, err
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// sourceInfo is where a snapshot lies: its folder, and its repository and
// revision when it lies in a Hugging Face cache.
type sourceInfo struct {
	Path, Repo, Revision string
}

// inventory is what the snapshot holds: every tensor's header entry and the
// parsed config, with no weight bytes read.
type inventory struct {
	source  sourceInfo // the resolved snapshot folder, and repo/revision when it lies in a cache
	snap    *hfcache.Snapshot
	config  *layout.Config
	refs    map[string]hfcache.TensorRef
	tensors []layout.Tensor
	bytes   int64
}

func takeInventory(source string) (*inventory, error) {
	if source == "" {
		return nil, fmt.Errorf("%w: no source snapshot given (-m)", ErrUsage)
	}
	res, err := hfcache.ResolveSource(source)
	if err != nil {
		return nil, err
	}
	snap, err := hfcache.OpenSnapshot(res.Dir)
	if err != nil {
		return nil, err
	}
	inv := &inventory{snap: snap, refs: make(map[string]hfcache.TensorRef)}
	inv.source = sourceInfo{Path: res.Dir, Repo: res.Repo, Revision: res.Revision}
	if abs, err := filepath.Abs(res.Dir); err == nil {
		inv.source.Path = abs
	}
	cfgData, err := snap.ReadFile("config.json", 16<<20)
	if err == nil {
		inv.config, err = layout.ParseConfig(cfgData)
	}
	if err != nil {
		snap.Close()
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	for _, t := range snap.Tensors() {
		inv.refs[t.Name] = t
		inv.tensors = append(inv.tensors, layout.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
		inv.bytes += t.Size
	}
	if err := layout.CheckInventory(inv.config, inv.tensors); err != nil {
		snap.Close()
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return inv, nil
}

// CheckOutputPlacement refuses an output that overlaps its source (a
// snapshot or an input pack) or lies inside a Hugging Face cache: dgq never
// writes there.
func CheckOutputPlacement(source, out string) error {
	if out == "" || source == "" {
		return nil
	}
	src, err1 := filepath.Abs(source)
	dst, err2 := filepath.Abs(out)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("dgq: %w", err)
	}
	if r, err := filepath.EvalSymlinks(src); err == nil {
		src = r
	}
	if within(dst, src) || within(src, dst) {
		return fmt.Errorf("%w: output %s overlaps the source %s; choose another -o", ErrUsage, out, source)
	}
	if hfcache.IsInCache(dst) {
		return fmt.Errorf("%w: output %s lies inside the Hugging Face cache; dgq never writes there, choose another -o", ErrUsage, out)
	}
	return nil
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// writePack executes the plan through a PackWriter and publishes the pack.
// em, when not nil, makes the pack layered. The stale staging folders the
// writer removed are recorded in res.
func writePack(ctx context.Context, opts QuantizeOptions, plan *layout.Plan, inv *inventory, em *overlayEmitter, im *Imatrix, res *QuantizeResult) (*Manifest, []TensorStats, error) {
	blobSize := plan.BlobSize
	if em != nil {
		blobSize = em.local.Size
	}
	w, err := NewPackWriter(opts.Out, opts.Force, blobSize)
	if err != nil {
		return nil, nil, err
	}
	defer w.Abort()
	res.RemovedStaging = w.RemovedStale()
	prog := ProgressOrNop(opts.Progress)
	prog.Start("quantize", inv.bytes)
	x := &executor{blob: w, workers: opts.Workers, method: opts.Encoder, imatrix: im, progress: prog}
	if em != nil {
		x.place = em.place
	}
	tensors, stats, err := x.run(ctx, plan, inv.refs)
	prog.Finish()
	if err != nil {
		return nil, nil, err
	}
	files, err := copySideFiles(w.Staging(), inv.snap)
	if err != nil {
		return nil, nil, err
	}
	m := newManifest(plan, tensors, files, inv.source, opts.Encoder)
	m.DGQ.Errors = finiteClasses(newReport(plan, stats).Classes)
	if im != nil {
		m.DGQ.Imatrix = im.Ref()
	}
	if em != nil {
		em.annotate(m, inv)
	}
	m.SetVersion()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := w.Publish(m); err != nil {
		return nil, nil, err
	}
	return m, stats, nil
}

// newManifest describes a self-contained pack of the plan; the overlay
// emitter adds the sources of a layered one, and SetVersion sets the version.
func newManifest(plan *layout.Plan, tensors []Tensor, files []File, source sourceInfo, method codecs.Method) *Manifest {
	m := &Manifest{
		Profile:       plan.Profile.EngineProfile(),
		SourceModel:   PublicSource(source.Path, source.Repo),
		Blob:          BlobName,
		CustomClasses: layout.Policy{Profile: plan.Profile, Overrides: plan.Overrides}.CustomClasses(),
		Tensors:       tensors,
		DGQ: &Extension{
			Generator: "dgq " + Version,
			Profile:   string(plan.Profile),
			Overrides: plan.Overrides,
			Encoder:   &method,
			BlobSize:  plan.BlobSize,
			Files:     files,
			DGQOnly:   plan.EngineIncompatibility(),
		},
	}
	if plan.HasExperts {
		split := plan.ExpertSplit
		m.ExpertSplit = &split
	}
	if source.Repo != "" {
		m.DGQ.Source = &BaseModel{Repo: source.Repo, Revision: source.Revision}
	}
	return m
}

// SetVersion sets the version by the engine's writer rule: custom_classes →
// 4, else sources → 3, else an nvfp4 tensor or an nvfp4 profile → 2, else 1;
// a pack the engine cannot run (dgq.dgq_only) gets VersionDGQOnly.
func (m *Manifest) SetVersion() {
	switch {
	case m.DGQ != nil && m.DGQ.DGQOnly != "":
		m.Version = VersionDGQOnly
	case len(m.CustomClasses) > 0:
		m.Version = VersionCustom
	case m.Layered():
		m.Version = VersionLayered
	case m.Profile == "nvfp4" || m.Profile == "nvfp4_experts" || slices.ContainsFunc(m.Tensors, func(t Tensor) bool { return t.Format == codecs.NVFP4 }):
		m.Version = VersionNVFP4
	default:
		m.Version = VersionAffine
	}
}

// CheckReportPath refuses a --report path that could destroy data or that
// cannot be written, before any work: inside the source snapshot (it could
// replace a shard), inside the output (it could replace a file of the new
// pack), inside a Hugging Face cache (it could replace a snapshot link or
// blob), an existing directory, or a directory dgq cannot create a file in.
func CheckReportPath(report, source, out string) error {
	return CheckOutputFile("--report", report, source, out)
}

// CheckOutputFile is CheckReportPath's rules for the file a flag names
// (--report, --plot): the errors name that flag.
func CheckOutputFile(flag, report, source, out string) error {
	abs, err := filepath.Abs(report)
	if err != nil {
		return fmt.Errorf("dgq: %s %s: %w", flag, report, err)
	}
	real := abs
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		real = filepath.Join(r, filepath.Base(abs))
	}
	for _, dir := range []string{source, out} {
		if dir == "" {
			continue
		}
		d, _ := filepath.Abs(dir)
		if r, err := filepath.EvalSymlinks(d); err == nil && (within(real, r) || within(abs, r)) || within(abs, d) {
			return fmt.Errorf("%w: %s %s lies inside %s, whose files it could replace; write it elsewhere", ErrUsage, flag, report, dir)
		}
	}
	if hfcache.IsInCache(abs) || hfcache.IsInCache(real) {
		return fmt.Errorf("%w: %s %s lies inside the Hugging Face cache; dgq never writes there, write it elsewhere", ErrUsage, flag, report)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return fmt.Errorf("%w: %s %s is a directory; give a file path", ErrUsage, flag, report)
	}
	f, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".probe-")
	if err != nil {
		return fmt.Errorf("%w: %s %s cannot be written: %v", ErrUsage, flag, report, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}
