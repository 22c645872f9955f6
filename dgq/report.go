package dgq

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/layout"
)

// Report is the per-tensor error report of a quantize run (--report).
type Report struct {
	Profile   string            `json:"profile"`
	Overrides []layout.Override `json:"overrides"`
	Tensors   []TensorReport    `json:"tensors"`
	Classes   []ClassReport     `json:"classes"`
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
}

// ClassReport aggregates the error of one class (rel_rmse over all of the
// class's elements together).
type ClassReport struct {
	Class     layout.Class `json:"class"`
	Tensors   int          `json:"tensors"`
	RelRMSE   float64      `json:"rel_rmse"`
	MaxAbsErr float64      `json:"max_abs_err"`
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
		r.Classes = append(r.Classes, ClassReport{Class: c, Tensors: counts[c], RelRMSE: st.RelRMSE(), MaxAbsErr: st.MaxAbsErr})
	}
	return r
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

func (r *Report) writeFile(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("dgq: encode report: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}
