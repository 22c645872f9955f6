package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/session"
)

// runOutput is what dgq run shows while it generates: the reply streamed
// to stdout block by block (or, with --json, one object at the end), the
// --trace lines or, on a terminal, a status line on stderr, and the stats
// line at the end.
type runOutput struct {
	e       *env
	asJSON  bool
	trace   bool
	seed    uint64
	backend string
	prec    string

	status *statusLine // nil: none (stderr is no terminal, or --trace)
	// midLine: the reply's text on the terminal does not end a line, so the
	// status line (same terminal) would overwrite it and is not drawn.
	midLine bool
	shown   bool // some reply text was written
	// tokens and steps are the tokens and steps of the chunks so far;
	// committed the steps at the chunk before the last (an interrupted
	// run's last chunk flushes, after steps of a block never committed).
	tokens, steps, committed int
}

func newRunOutput(e *env, o session.RunOptions, lo session.Options, trace, asJSON bool) *runOutput {
	out := &runOutput{e: e, asJSON: asJSON, trace: trace, seed: o.Generation.Seed,
		backend: cmp.Or(lo.Backend, "cpu"), prec: cmp.Or(lo.Precision, backend.F32)}
	if e.interactive && !trace {
		out.status = &statusLine{w: e.stderr}
	}
	return out
}

// note prints the library's notes (the cpu backend's cost of a step), once.
func (o *runOutput) note() func(string) {
	n := onceNotifier(o.e)
	return func(msg string) { o.status.clear(); n(msg) }
}

// onceNotifier is notifier printing only the first note: session.Load's
// note on the cpu backend's cost (Options.Note) is said once even when a
// command loads two models (verify).
func onceNotifier(e *env) func(string) {
	var once sync.Once
	return func(msg string) { once.Do(func() { notifier(e)(msg) }) }
}

// step is the generation's Trace: a --trace line, or the status line.
func (o *runOutput) step(s generate.StepTrace) {
	if o.trace {
		fmt.Fprintf(o.e.stderr, "block %d step %2d: T %.4f accepted %3d mean entropy %.4f%s\n", s.Block, s.Step, s.Temperature, s.Accepted, s.MeanEntropy, map[bool]string{true: " stop", false: ""}[s.Stopped])
		return
	}
	if o.status == nil || o.midLine {
		return
	}
	per := s.Elapsed / time.Duration(o.steps+s.Step)
	line := fmt.Sprintf("run: block %d, step %d (%s per step), %d tokens", s.Block+1, s.Step, shortDuration(per), o.tokens)
	if o.tokens > 0 {
		line += fmt.Sprintf(", %.2f tokens/s", float64(o.tokens)/s.Elapsed.Seconds())
	}
	o.status.draw(line)
}

// chunk is the run's Stream: the reply's new text to stdout as it comes.
func (o *runOutput) chunk(c session.ReplyChunk) {
	o.tokens, o.committed, o.steps = c.Tokens, o.steps, c.Steps
	if o.asJSON || c.Text == "" {
		return
	}
	o.status.clear()
	io.WriteString(o.e.stdout, c.Text)
	o.shown = true
	o.midLine = o.status != nil && isTerminal(o.e.stdout) && !strings.HasSuffix(c.Text, "\n")
}

// finish ends the run: the reply's last newline, the stats line, or the
// JSON object; an interrupted run's reply so far and the line that says so
// (root's interruption, with the detail here).
func (o *runOutput) finish(r *session.RunResult, err error) error {
	o.status.clear()
	if err != nil && (r == nil || !r.Interrupted || errclass.Of(err) != errclass.Interrupted) {
		if o.shown && !o.asJSON {
			fmt.Fprintln(o.e.stdout)
		}
		return err
	}
	g := r.Generation
	secs := r.Elapsed.Seconds()
	rate := float64(len(r.Tokens)) / max(secs, 1e-9)
	perBlock := float64(g.Steps) / float64(max(g.Blocks, 1))
	if r.Interrupted { // the committed blocks' steps only
		perBlock = float64(o.committed) / float64(max(g.Blocks, 1))
	}
	if o.asJSON {
		if werr := writeJSON(o.e.stdout, runJSON{PromptTokens: len(r.PromptIDs), Reply: r.Reply, Tokens: len(r.Tokens),
			ReplyTokens: r.ReplyTokens, Blocks: g.Blocks, Steps: g.Steps, StepsPerBlock: perBlock, Seconds: secs,
			TokensPerSecond: rate, Seed: o.seed, Backend: o.backend, Precision: o.prec, StopReason: g.StopReason,
			Interrupted: r.Interrupted}); werr != nil && err == nil {
			return werr
		}
	} else {
		fmt.Fprintln(o.e.stdout)
	}
	if r.Interrupted {
		detail := fmt.Sprintf("after %s (%d tokens)", plural(g.Blocks, "block", "blocks"), len(r.Tokens))
		switch {
		case o.asJSON:
			detail += `; the reply so far is the JSON object's "reply"`
		case g.Blocks > 0:
			detail += "; the reply so far is above"
		}
		return &partialResult{err: err, detail: detail, jsonDone: o.asJSON}
	}
	fmt.Fprintf(o.e.stderr, "%s (%d in the reply) in %s, %s (%.1f per block), %.1f s: %.2f tokens/s; prompt %d tokens, stop: %s\n",
		plural(len(r.Tokens), "token", "tokens"), r.ReplyTokens, plural(g.Blocks, "block", "blocks"), plural(g.Steps, "step", "steps"),
		perBlock, secs, rate, len(r.PromptIDs), g.StopReason)
	return nil
}

// shortDuration writes d with two or three significant digits: "4.2 min",
// "12 s", "3.4 s", "56 ms", "5.9 ms".
func shortDuration(d time.Duration) string {
	switch s := d.Seconds(); {
	case s >= 90:
		return fmt.Sprintf("%.1f min", s/60)
	case s >= 10:
		return fmt.Sprintf("%.0f s", s)
	case s >= 1:
		return fmt.Sprintf("%.1f s", s)
	case s >= 0.01:
		return fmt.Sprintf("%.0f ms", s*1000)
	default:
		return fmt.Sprintf("%.1f ms", s*1000)
	}
}

// runJSON is dgq run --json's object (docs/cli.md, "dgq run --json").
type runJSON struct {
	PromptTokens    int     `json:"prompt_tokens"`
	Reply           string  `json:"reply"`
	Tokens          int     `json:"tokens"`
	ReplyTokens     int     `json:"reply_tokens"`
	Blocks          int     `json:"blocks"`
	Steps           int     `json:"steps"`
	StepsPerBlock   float64 `json:"steps_per_block"`
	Seconds         float64 `json:"seconds"`
	TokensPerSecond float64 `json:"tokens_per_s"`
	Seed            uint64  `json:"seed"`
	Backend         string  `json:"backend"`
	Precision       string  `json:"precision"`
	StopReason      string  `json:"stop_reason"`
	Interrupted     bool    `json:"interrupted"`
}

// statusLine is one line of status on a terminal, redrawn in place at most
// ten times a second and cleared before anything else is written there.
// Its methods do nothing on a nil statusLine.
type statusLine struct {
	w     io.Writer
	last  time.Time
	drawn bool
}

func (s *statusLine) draw(line string) {
	if s == nil || time.Since(s.last) < 100*time.Millisecond {
		return
	}
	s.last = time.Now()
	fmt.Fprintf(s.w, "\r%s\x1b[K", line)
	s.drawn = true
}

func (s *statusLine) clear() {
	if s != nil && s.drawn {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.drawn = false
	}
}
