package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// cancelOnWrite is a writer that cancels a run with a signal's cause at its
// n-th write (stdout: the first block's text; stderr: a --trace line).
type cancelOnWrite struct {
	mu     sync.Mutex
	b      strings.Builder
	n      int
	cancel func()
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n--; w.n == 0 {
		w.cancel()
	}
	return w.b.Write(p)
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// run streams the reply to stdout (the reply and a newline), the same at the
// same seed and the same as --json's "reply"; stderr holds one statistics
// line; --json is one object with the documented keys, the same at the same
// seed but for the timings.
func TestRunStreamsAndReports(t *testing.T) {
	pack := demoPack(t, "q4")
	args := []string{"run", pack, "--prompt", "Tell me about the sea", "--seed", "5", "--max-new-tokens", "48"}
	a, b := dgqRun(args...), dgqRun(args...)
	if a.code != 0 || a.stdout != b.stdout || !strings.HasSuffix(a.stdout, "\n") {
		t.Fatalf("run twice: %d %q / %d %q (%s)", a.code, a.stdout, b.code, b.stdout, a.stderr)
	}
	stats := regexp.MustCompile(`^\d+ tokens \(\d+ in the reply\) in \d+ blocks?, \d+ steps? \([0-9.]+ per block\), [0-9.]+ s: [0-9.]+ tokens/s; prompt \d+ tokens, stop: (eos|max_length)\n$`)
	if !stats.MatchString(a.stderr) {
		t.Errorf("stderr is not one statistics line: %q", a.stderr)
	}
	var objs [2]map[string]any
	for i := range objs {
		j := dgqRun(append(args, "--json")...)
		if j.code != 0 || json.Unmarshal([]byte(j.stdout), &objs[i]) != nil {
			t.Fatalf("run --json: %d %q %q", j.code, j.stdout, j.stderr)
		}
	}
	if objs[0]["reply"] != strings.TrimSuffix(a.stdout, "\n") || objs[0]["interrupted"] != false || objs[0]["seed"] != 5.0 || objs[0]["backend"] != "cpu" {
		t.Errorf("run --json %v, text reply %q", objs[0], a.stdout)
	}
	for k, v := range objs[0] {
		if k != "seconds" && k != "tokens_per_s" && objs[1][k] != v {
			t.Errorf("run --json twice: %s = %v, then %v", k, v, objs[1][k])
		}
	}
}

// Interrupted, run keeps what it has: the committed blocks' text on stdout,
// one line on stderr saying how far it got, 130 for SIGINT; with --json the
// partial object ("interrupted": true, no error object after it), 143 for
// SIGTERM.
func TestRunInterruptedKeepsTheReplySoFar(t *testing.T) {
	pack := demoPack(t, "q4")
	args := []string{"run", pack, "--prompt", "Tell me about the sea", "--seed", "0", "--max-new-tokens", "64"}
	whole := dgqRun(args...)
	if whole.code != 0 || !strings.Contains(whole.stderr, "in 4 blocks") {
		t.Fatalf("seed 0 no longer takes 4 blocks: %d %q", whole.code, whole.stderr)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	stdout := &cancelOnWrite{n: 1, cancel: func() { cancel(signalCause{sig: syscall.SIGINT}) }} // the first block's text
	var stderr strings.Builder
	code := run(ctx, args, stdout, &stderr)
	got := strings.TrimSuffix(stdout.String(), "\n")
	line := regexp.MustCompile(`^dgq: run: interrupted by SIGINT after 1 block \(16 tokens\); the reply so far is above\n$`)
	if code != exitCanceled || !line.MatchString(stderr.String()) || got == "" || !strings.HasPrefix(whole.stdout, got) {
		t.Errorf("interrupted after a block: exit %d, stdout %q (whole %q), stderr %q", code, stdout.String(), whole.stdout, stderr.String())
	}

	ctx, cancel = context.WithCancelCause(context.Background())
	trace := &cancelOnWrite{n: 3, cancel: func() { cancel(signalCause{sig: syscall.SIGTERM}) }} // in the first block
	var out strings.Builder
	code = run(ctx, append(args, "--json", "--trace"), &out, trace)
	lines := strings.Split(strings.TrimRight(trace.String(), "\n"), "\n")
	var obj map[string]any
	if err := json.Unmarshal([]byte(out.String()), &obj); err != nil || obj["interrupted"] != true || obj["blocks"] != 0.0 ||
		obj["stop_reason"] != "canceled" || obj["reply"] != "" || obj["steps"] != 3.0 || obj["steps_per_block"] != 0.0 {
		t.Errorf("run --json interrupted: %q (%v)", out.String(), err)
	}
	if code != exitTerminated || len(lines) != 4 || lines[3] != `dgq: run: interrupted by SIGTERM after 0 blocks (0 tokens); the reply so far is the JSON object's "reply"` {
		t.Errorf("run --json interrupted: exit %d, stderr %q", code, trace.String())
	}
}
