package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress bar geometry and timing.
const (
	barCells  = 40                     // the bar's cells when the terminal does not tell its width
	redraw    = 100 * time.Millisecond // at most ten redraws a second
	rateAfter = time.Second            // nothing is drawn before this much data: no absurd first rate
)

// barProgress renders dgq.Progress phases as one progress bar line
// (schollz/progressbar) on a terminal (stderr) and stays silent otherwise:
// the phase, the percentage, the bar, done/total, the rate and the time
// left. The first second of a phase is only counted, not drawn, so the first
// rate the bar shows is measured over at least a second (a rate over the
// first microseconds reads as terabytes a second); the bar has a fixed
// width when the terminal does not tell its own. The line is cleared when
// the phase finishes.
type barProgress struct {
	out     io.Writer
	visible bool
	counts  bool       // totals are counts of steps, not bytes
	columns func() int // the terminal's width; ≤ 0 when unknown

	mu      sync.Mutex
	bar     *progressbar.ProgressBar
	start   time.Time
	pending int64 // counted before the bar was drawn
}

func newProgress(e *env) *barProgress {
	return &barProgress{out: e.stderr, visible: e.interactive, columns: termColumns(e.stderr)}
}

// newCountProgress is newProgress for phases counted in steps.
func newCountProgress(e *env) *barProgress {
	p := newProgress(e)
	p.counts = true
	return p
}

// termColumns is the width of the terminal w is, asked at each redraw (the
// window may be resized); 0 when w is not a terminal or does not tell.
func termColumns(w io.Writer) func() int {
	return func() int {
		f, ok := w.(*os.File)
		if !ok {
			return 0
		}
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}
}

// notifier prints what a library run tells the user while it goes on (a
// copy it makes, its size): one line "note: …" on stderr each.
func notifier(e *env) func(string) {
	return func(msg string) { fmt.Fprintln(e.stderr, "note: "+oneLine(msg)) }
}

func (p *barProgress) Start(phase string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finish()
	width := progressbar.OptionFullWidth()
	if p.columns() <= 0 {
		width = progressbar.OptionSetWidth(barCells) // full width of an unknown terminal is a zero-width bar
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.out),
		progressbar.OptionSetVisibility(p.visible),
		progressbar.OptionSetDescription(phase),
		progressbar.OptionShowBytes(!p.counts),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionThrottle(redraw),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionShowCount(),
		width,
	}
	if p.counts {
		opts = append(opts, progressbar.OptionShowIts())
	}
	p.bar = progressbar.NewOptions64(total, opts...)
	p.bar.StartWithoutRender() // the rate and time left count from here
	p.start, p.pending = time.Now(), 0
}

func (p *barProgress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if time.Since(p.start) < rateAfter {
		p.pending += n
		return
	}
	_ = p.bar.Add64(p.pending + n)
	p.pending = 0
}

func (p *barProgress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finish()
}

// finish ends the phase in progress, if any: its line is cleared.
func (p *barProgress) finish() {
	if p.bar != nil {
		if p.pending > 0 {
			_ = p.bar.Add64(p.pending)
		}
		_ = p.bar.Finish()
		p.bar, p.pending = nil, 0
	}
}
