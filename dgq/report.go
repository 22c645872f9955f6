package dgq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

// Report is the per-tensor error report of a quantize run (--report).
type Report struct {
	Profile   string            `json:"profile"`
	Overrides []layout.Override `json:"overrides"`
	Tensors   []TensorReport    `json:"tensors"`
	Classes   []ClassReport     `json:"classes"`
	// Imatrix identifies the importance matrix the search was weighted with
	// (quantize --imatrix); absent without one.
	Imatrix *ImatrixRef `json:"imatrix,omitempty"`
}

// TensorReport is one tensor's error: rel_rmse = sqrt(Σ(deq−src)²/Σsrc²)
// over the whole tensor, max_abs_err = max |deq−src|. Raw tensors are 0.
type TensorReport struct {
	Name      string        `json:"name"`
	Class     layout.Class  `json:"class"`
	Format    codecs.Format `json:"format"`
	Params    int64         `json:"params"`
	Bytes     int64         `json:"bytes"`
	RelRMSE   float64       `json:"rel_rmse"`
	MaxAbsErr float64       `json:"max_abs_err"`
	// WeightedRelRMSE is sqrt(Σw·(deq−src)²/Σw·src²) under the imatrix's
	// column weights (what the weighted search minimized); absent without
	// an imatrix and for raw tensors.
	WeightedRelRMSE *float64 `json:"weighted_rel_rmse,omitempty"`
	// ImatrixUnreached counts the tensor's matrices (experts) no
	// calibration row reached, encoded with uniform weights.
	ImatrixUnreached int `json:"imatrix_unreached,omitempty"`
}

// ClassReport aggregates the error of one class (rel_rmse over all of the
// class's elements together).
type ClassReport struct {
	Class     layout.Class `json:"class"`
	Tensors   int          `json:"tensors"`
	RelRMSE   float64      `json:"rel_rmse"`
	MaxAbsErr float64      `json:"max_abs_err"`
	// WeightedRelRMSE: as TensorReport's, over the class's weighted
	// tensors together.
	WeightedRelRMSE *float64 `json:"weighted_rel_rmse,omitempty"`
}

func newReport(plan *layout.Plan, stats []TensorStats) *Report {
	r := &Report{Profile: string(plan.Profile), Overrides: plan.Overrides}
	if r.Overrides == nil {
		r.Overrides = []layout.Override{}
	}
	byClass := map[layout.Class]*codecs.Stats{}
	counts := map[layout.Class]int{}
	var order []layout.Class
	for i, s := range stats {
		e := plan.Entries[i]
		r.Tensors = append(r.Tensors, TensorReport{
			Name: s.Name, Class: s.Class, Format: s.Format, Params: s.Stats.N, Bytes: e.Size,
			RelRMSE: s.Stats.RelRMSE(), MaxAbsErr: s.Stats.MaxAbsErr,
			WeightedRelRMSE: weightedRel(s.Stats), ImatrixUnreached: s.Unreached,
		})
		if byClass[s.Class] == nil {
			byClass[s.Class] = &codecs.Stats{}
			order = append(order, s.Class)
		}
		byClass[s.Class].Merge(s.Stats)
		counts[s.Class]++
	}
	for _, c := range order {
		st := byClass[c]
		r.Classes = append(r.Classes, ClassReport{Class: c, Tensors: counts[c], RelRMSE: st.RelRMSE(), MaxAbsErr: st.MaxAbsErr, WeightedRelRMSE: weightedRel(*st)})
	}
	return r
}

// weightedRel is the weighted relative error of an encoding with
// importance, nil for one without (or a non-finite one).
func weightedRel(s codecs.Stats) *float64 {
	if s.SumWSqRef == 0 {
		return nil
	}
	v := s.WeightedRelRMSE()
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

// finiteClasses keeps the classes whose errors are finite numbers (JSON has
// no infinity: a class whose source is all zeros but whose stored values
// are not would have an infinite relative error, and is left out).
func finiteClasses(cs []ClassReport) []ClassReport {
	var out []ClassReport
	for _, c := range cs {
		if !math.IsInf(c.RelRMSE, 0) && !math.IsNaN(c.RelRMSE) && !math.IsInf(c.MaxAbsErr, 0) && !math.IsNaN(c.MaxAbsErr) {
			out = append(out, c)
		}
	}
	return out
}

// maxReportBytes bounds what checkReportReplace reads of an existing
// --report file (a report of the real model is well under 1 MiB).
const maxReportBytes = 64 << 20

// checkReportReplace refuses, before any work, an existing --report file
// that would be replaced: without force any (ErrExists), and even with force
// one that is not a previous dgq quantize report (ErrUsage) — --report could
// otherwise name another pack's manifest, a source file, the dgq binary.
func checkReportReplace(path string, force bool) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dgq: --report %s: %w", path, err)
	}
	if !force {
		return fmt.Errorf("%w: --report %s exists; pass --force to replace a previous report, or write the report elsewhere", ErrExists, path)
	}
	if why := notAReport(path, st); why != "" {
		return fmt.Errorf("%w: --report %s exists and is not a dgq quantize report (%s); even with --force dgq replaces only a previous report: remove it or write the report elsewhere", ErrUsage, path, why)
	}
	return nil
}

// notAReport says why the file at path is not a report Quantize wrote ("" when
// it is one): a regular file of at most maxReportBytes holding one JSON object
// with exactly the keys profile, overrides, tensors and classes, of their
// types.
func notAReport(path string, st fs.FileInfo) string {
	if st.Mode()&fs.ModeSymlink != 0 {
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			return "a link to no regular file"
		}
	} else if !st.Mode().IsRegular() {
		return "not a regular file"
	}
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReportBytes+1))
	if err != nil {
		return err.Error()
	}
	if len(data) > maxReportBytes {
		return fmt.Sprintf("larger than %d bytes", maxReportBytes)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return "not a JSON object"
	}
	want := []string{"classes", "overrides", "profile", "tensors"}
	got := slices.Sorted(maps.Keys(keys))
	if !slices.Equal(got, want) {
		return fmt.Sprintf("its keys are %s, a report's %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil || r.Profile == "" {
		return "its keys do not hold a report's values"
	}
	return ""
}

func (r *Report) writeFile(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("dgq: encode report: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}
