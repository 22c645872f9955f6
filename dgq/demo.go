package dgq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// DemoOptions configures Demo.
type DemoOptions struct {
	Profile  string // default q4
	Sets     []string
	Out      string // pack directory to keep; "" makes the pack in a temporary folder and removes it
	Force    bool
	Progress Progress
}

// DemoResult holds the three steps of the demo.
type DemoResult struct {
	Source   string
	Out      string // where the pack was written
	Kept     bool   // the pack is still at Out (Out was given); else it was removed
	Quantize *QuantizeResult
	Inspect  *PackInfo
	Audit    *AuditReport
}

// Demo runs the main job end to end on the embedded tiny checkpoint: it
// writes the snapshot to a temporary folder, quantizes it, inspects and
// audits the pack. Everything it made in the temporary folder is removed
// before it returns: the snapshot always, the pack too unless opts.Out was
// given, where the pack stays (DemoResult.Kept).
func Demo(ctx context.Context, opts DemoOptions) (*DemoResult, error) {
	if opts.Profile == "" {
		opts.Profile = "q4"
	}
	tmp, err := os.MkdirTemp("", "dgq-demo-")
	if err != nil {
		return nil, fmt.Errorf("dgq: %w", err)
	}
	defer os.RemoveAll(tmp) // the snapshot, and the pack when it was not asked for
	src, err := testmodel.WriteSnapshot(filepath.Join(tmp, "snapshot"))
	if err != nil {
		return nil, err
	}
	out := opts.Out
	if out == "" {
		out = filepath.Join(tmp, "tiny-"+opts.Profile+".dgq")
	}
	res := &DemoResult{Source: "embedded tiny DiffusionGemma checkpoint (" + testmodel.HubInfo().Repo + ")", Out: out, Kept: opts.Out != ""}
	res.Quantize, err = Quantize(ctx, QuantizeOptions{Source: src, Out: out, Profile: opts.Profile, Sets: opts.Sets, Force: opts.Force, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	if res.Inspect, err = Inspect(out); err != nil {
		return nil, err
	}
	if res.Audit, err = Audit(ctx, out, AuditOptions{Progress: opts.Progress}); err != nil {
		return nil, err
	}
	return res, nil
}
