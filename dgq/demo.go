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
	Out      string // pack directory; default: a fresh temporary directory
	Force    bool
	Progress Progress
}

// DemoResult holds the three steps of the demo.
type DemoResult struct {
	Source   string
	Out      string
	Quantize *QuantizeResult
	Inspect  *PackInfo
	Audit    *AuditReport
}

// Demo runs the main job end to end on the embedded tiny checkpoint: it
// writes the snapshot to a temporary folder, quantizes it, inspects and
// audits the pack. The snapshot folder is removed afterwards; the pack stays.
func Demo(ctx context.Context, opts DemoOptions) (*DemoResult, error) {
	if opts.Profile == "" {
		opts.Profile = "q4"
	}
	tmp, err := os.MkdirTemp("", "dgq-demo-")
	if err != nil {
		return nil, fmt.Errorf("dgq: %w", err)
	}
	src, err := testmodel.WriteSnapshot(filepath.Join(tmp, "snapshot"))
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	defer func() {
		os.RemoveAll(src)
		if opts.Out != "" {
			os.Remove(tmp)
		}
	}()
	out := opts.Out
	if out == "" {
		out = filepath.Join(tmp, "tiny-"+opts.Profile+".dgq")
	}
	res := &DemoResult{Source: "embedded tiny DiffusionGemma checkpoint (" + testmodel.HubInfo().Repo + ")", Out: out}
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
