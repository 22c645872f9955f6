package dgq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// cardVerify is the part of a `dgq verify --json` report (runtime/check's
// VerifyReport, docs/cli.md "dgq verify --json") a card shows. dgq cannot
// import runtime/check (it imports dgq), so the keys are mirrored here; a
// test decodes a real report into it. Pointers mark the keys a report must
// hold.
type cardVerify struct {
	Pack       *string   `json:"pack"`
	SourceKind string    `json:"source_kind"`
	Backend    string    `json:"backend"`
	Precision  string    `json:"precision"`
	Text       string    `json:"text"`
	Windows    int       `json:"windows"`
	Prefix     int       `json:"prefix"`
	Canvas     int       `json:"canvas"`
	NoiseRates []float64 `json:"noise_rates"`
	Seed       uint64    `json:"seed"`
	Positions  *int      `json:"positions"`
	NonFinite  int       `json:"non_finite"`
	KLD        *struct {
		Mean *float64 `json:"mean"`
		P99  *float64 `json:"p99"`
		P999 float64  `json:"p999"`
		Max  float64  `json:"max"`
	} `json:"kld"`
	Top1     *float64 `json:"top1_agreement"`
	Accuracy *struct {
		Source float64 `json:"source"`
		Pack   float64 `json:"pack"`
	} `json:"accuracy"`
	PerNoise []struct {
		Rate    float64 `json:"rate"`
		SC      bool    `json:"sc"`
		KLDMean float64 `json:"kld_mean"`
		KLDP99  float64 `json:"kld_p99"`
		Top1    float64 `json:"top1"`
	} `json:"per_noise"`
	Generation *struct {
		Runs           int          `json:"runs"`
		Tokens         int          `json:"tokens"`
		Identical      int          `json:"identical"`
		TokenAgreement float64      `json:"token_agreement"`
		StepsPerBlock  verifyPairJS `json:"steps_per_block"`
		SettleSteps    verifyPairJS `json:"settle_steps"`
	} `json:"generation"`
	Notes []string `json:"notes"`
	// Error is what a failed `dgq verify --json` prints instead.
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// verifyPairJS is a quantity of each model in a verify report.
type verifyPairJS struct {
	Source float64 `json:"source"`
	Pack   float64 `json:"pack"`
}

// readVerifyReport reads and checks a `dgq verify --json` report.
func readVerifyReport(p string) (*cardVerify, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%w: --verify %s: %w", ErrCardReport, p, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%w: --verify %s is a directory; give the file dgq verify --json wrote", ErrCardReport, p)
	}
	if st.Size() > maxVerifyReport {
		return nil, fmt.Errorf("%w: --verify %s is %d bytes, more than a verify report (%d-byte limit)", ErrCardReport, p, st.Size(), maxVerifyReport)
	}
	data, err := readCapped(p, maxVerifyReport)
	if err != nil {
		return nil, fmt.Errorf("%w: --verify %s: %w", ErrCardReport, p, err)
	}
	var r cardVerify
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: --verify %s is not a dgq verify --json report: %v", ErrCardReport, p, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: --verify %s holds more than one JSON value", ErrCardReport, p)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%w: --verify %s: %v", ErrCardReport, p, err)
	}
	return &r, nil
}

// check refuses a report without the keys a card shows or with values out
// of range.
func (r *cardVerify) check() error {
	switch {
	case r.Error != nil && r.Pack == nil:
		return fmt.Errorf("it is the error of a failed dgq verify (%q), not a report", r.Error.Message)
	case r.Pack == nil || *r.Pack == "":
		return errors.New(`it has no "pack": not a dgq verify --json report`)
	case r.KLD == nil || r.KLD.Mean == nil || r.KLD.P99 == nil:
		return errors.New(`it has no "kld" mean and p99: not a dgq verify --json report`)
	case r.Top1 == nil:
		return errors.New(`it has no "top1_agreement": not a dgq verify --json report`)
	case r.Positions == nil:
		return errors.New(`it has no "positions": not a dgq verify --json report`)
	case *r.Positions < 0 || r.NonFinite < 0 || r.Windows < 0:
		return errors.New("negative counts")
	case !(*r.KLD.Mean >= 0) || !(*r.KLD.P99 >= 0) || r.KLD.P999 < 0 || r.KLD.Max < 0:
		return errors.New("a negative KL divergence")
	case !(*r.Top1 >= 0 && *r.Top1 <= 1):
		return fmt.Errorf("top1_agreement %g is not a fraction", *r.Top1)
	}
	return nil
}

// checkReportPack refuses a report that measured another pack. A report
// names the pack folder verify was given; when that folder is this pack, or
// a pack with the same manifest (a copy), the report is this pack's. When it
// is not at hand (moved, or a path relative to another folder) nothing can
// be told: note says so.
func checkReportPack(r *cardVerify, reportPath, dir string) (note string, err error) {
	here, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return "", fmt.Errorf("dgq: %w", err)
	}
	measured := *r.Pack
	candidates := []string{measured}
	if !filepath.IsAbs(measured) {
		candidates = append(candidates, filepath.Join(filepath.Dir(reportPath), measured))
	}
	other := false // a candidate is a pack with another manifest
	for _, c := range candidates {
		st, err := os.Stat(c)
		if err != nil || !st.IsDir() {
			continue
		}
		if dst, err := os.Stat(dir); err == nil && os.SameFile(st, dst) {
			return "", nil
		}
		there, err := os.ReadFile(filepath.Join(c, ManifestName))
		if err == nil && bytes.Equal(there, here) {
			return "", nil
		}
		other = other || err == nil
	}
	if other {
		return "", fmt.Errorf("%w: %s measured the pack %s, whose manifest differs from %s's; run dgq verify %s --json and pass its report",
			ErrCardReportPack, reportPath, measured, dir, dir)
	}
	return fmt.Sprintf("the verify report measured %s, which is not at hand: that it is this pack's report is not checked", measured), nil
}
