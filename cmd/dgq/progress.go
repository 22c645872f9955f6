package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// barProgress renders dgq.Progress phases as progress bars on a terminal and
// stays silent otherwise.
type barProgress struct {
	out     io.Writer
	visible bool
	counts  bool // totals are counts of steps, not bytes
	bar     *progressbar.ProgressBar
}

func newProgress(e *env) *barProgress { return &barProgress{out: e.stderr, visible: e.interactive} }

// newCountProgress is newProgress for phases counted in steps.
func newCountProgress(e *env) *barProgress {
	return &barProgress{out: e.stderr, visible: e.interactive, counts: true}
}

func (p *barProgress) Start(phase string, total int64) {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.out),
		progressbar.OptionSetVisibility(p.visible),
		progressbar.OptionSetDescription(phase),
		progressbar.OptionShowBytes(!p.counts),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
	}
	if p.counts {
		opts = append(opts, progressbar.OptionShowCount())
	}
	p.bar = progressbar.NewOptions64(total, opts...)
}

func (p *barProgress) Add(n int64) {
	if p.bar != nil {
		_ = p.bar.Add64(n)
	}
}

func (p *barProgress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}
