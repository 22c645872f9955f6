package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// registerMarkBackend, in a child process whose DGQ_TEST_MARK names a file,
// replaces the "cpu" backend with one that creates that file when the first
// matrix product with at least DGQ_TEST_MARK_ROWS weight rows starts: the
// test's deterministic sign that the child is inside a forward (with 262144,
// inside the lm_head product, its longest op). It changes no result, and
// only the test binary has it.
func registerMarkBackend() {
	path := os.Getenv("DGQ_TEST_MARK")
	if path == "" {
		return
	}
	rows, _ := strconv.Atoi(os.Getenv("DGQ_TEST_MARK_ROWS"))
	backend.Register("cpu", func(c backend.Config) (backend.Backend, error) {
		if c.Precision != backend.F32 {
			return nil, fmt.Errorf("%w: the cpu backend computes in f32 only", backend.ErrUnknown)
		}
		return &markBackend{Backend: cpu.New(c.Workers), path: path, rows: rows}, nil
	})
}

// markBackend is the cpu backend that marks the start of its first large
// matrix product (registerMarkBackend).
type markBackend struct {
	*cpu.Backend
	path string
	rows int
	once sync.Once
}

func (b *markBackend) MatMulNT(c, a backend.Buf, w backend.Weight, m int) error {
	if w.Rows() >= b.rows {
		b.once.Do(func() { os.WriteFile(b.path, nil, 0o644) })
	}
	return b.Backend.MatMulNT(c, a, w, m)
}

var (
	rsPackOnce            sync.Once
	rsPack, rsSnap, rsHub string
	rsPackErr             error
)

// rsRepo is the repo id of realShapePack's snapshot in its hub cache.
const rsRepo = "dgq-test/synth-1layer"

// realShapePack is a one-layer nvfp4 pack at the real model's dimensions
// (about 2 GB), quantized once per test binary from realShapeSource's
// checkpoint with the embedded tiny checkpoint's tokenizer beside it (so
// run can format a chat turn). Its source snapshot (hard links to the
// checkpoint's files) lies in a hub cache, hub, as rsRepo: verify overlays
// a temporary bf16 pack on it, as for a downloaded model. All of it lies
// under the folder TestMain removes.
func realShapePack(t *testing.T) (pack, hub string) {
	t.Helper()
	src := synthSource(t) // not skipped under -short: the whole test takes about 35 s on 2 cores
	rsPackOnce.Do(func() {
		root := filepath.Dir(src)
		const commit = "0123456789abcdef0123456789abcdef01234567"
		rsHub, rsPack = filepath.Join(root, "hub"), filepath.Join(root, "nvfp4-1layer")
		repoDir := filepath.Join(rsHub, "models--"+strings.ReplaceAll(rsRepo, "/", "--"))
		rsSnap = filepath.Join(repoDir, "snapshots", commit)
		if rsPackErr = os.MkdirAll(rsSnap, 0o755); rsPackErr != nil {
			return
		}
		if rsPackErr = os.MkdirAll(filepath.Join(repoDir, "refs"), 0o755); rsPackErr != nil {
			return
		}
		if rsPackErr = os.WriteFile(filepath.Join(repoDir, "refs", "main"), []byte(commit), 0o644); rsPackErr != nil {
			return
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			rsPackErr = err
			return
		}
		for _, e := range entries {
			if rsPackErr = os.Link(filepath.Join(src, e.Name()), filepath.Join(rsSnap, e.Name())); rsPackErr != nil {
				return
			}
		}
		for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
			b, err := testmodel.ReadFile(name)
			if err != nil {
				rsPackErr = err
				return
			}
			if rsPackErr = os.WriteFile(filepath.Join(rsSnap, name), b, 0o644); rsPackErr != nil {
				return
			}
		}
		_, rsPackErr = dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: rsSnap, Out: rsPack, Profile: "nvfp4"})
	})
	if rsPackErr != nil {
		t.Fatal(rsPackErr)
	}
	return rsPack, rsHub
}

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// dirState lists a folder's entries with their sizes.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d\n", e.Name(), info.Size())
	}
	return b.String()
}

// SIGINT or SIGTERM in the middle of a forward on a one-layer real-shape
// pack (CPU backend: a single op there takes seconds) stops run, bench,
// verify, smoke and parity within a second, with 130 (SIGINT) or 143
// (SIGTERM), one line on stderr saying so (besides the notes printed
// before), nothing left in $TMPDIR (verify's temporary bf16 pack over its
// source snapshot included) and nothing new beside the pack. smoke reports
// the interruption, not a failed check; run --json prints its partial
// object. parity runs the tiny checkpoint's reference scenarios (no
// reference exists for this model): it is interrupted inside the first
// denoising step's lm_head product.
func TestInterruptMidForwardStopsWithinASecond(t *testing.T) {
	pack, hub := realShapePack(t)
	ref := t.TempDir()
	if err := testmodel.WriteReference(ref); err != nil {
		t.Fatal(err)
	}
	const lmHead = 262144 // rows of the lm_head: its product is the longest op
	cases := []struct {
		name    string
		args    []string
		rows    int // the mark: the first product with at least this many weight rows
		sig     syscall.Signal
		code    int
		mention string
	}{
		{"run", []string{"run", pack, "--prompt", "Tell me about the sea"}, 0, syscall.SIGINT, exitCanceled, "dgq: run: interrupted by SIGINT after 0 blocks"},
		{"run --json", []string{"run", pack, "--prompt", "Tell me about the sea", "--json"}, 0, syscall.SIGTERM, exitTerminated, "dgq: run: interrupted by SIGTERM after 0 blocks"},
		{"bench", []string{"bench", pack}, 0, syscall.SIGTERM, exitTerminated, "dgq: bench: interrupted by SIGTERM"},
		{"verify", []string{"verify", pack, "--source", rsRepo, "--generations", "0"}, 0, syscall.SIGINT, exitCanceled, "dgq: verify: interrupted by SIGINT"},
		{"smoke", []string{"smoke", pack}, 0, syscall.SIGINT, exitCanceled, "dgq: smoke: interrupted by SIGINT"},
		{"parity", []string{"parity", pack, "--reference", ref}, lmHead, syscall.SIGINT, exitCanceled, "dgq: parity: interrupted by SIGINT"},
	}
	packBefore := dirState(t, pack)
	parentBefore := dirState(t, filepath.Dir(pack))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmp, marks := t.TempDir(), t.TempDir()
			mark := filepath.Join(marks, "forward")
			cmd := child(tc.args...)
			cmd.Env = append(cmd.Env, "TMPDIR="+tmp, "DGQ_TEST_MARK="+mark, "DGQ_TEST_MARK_ROWS="+strconv.Itoa(tc.rows),
				"DGQ_HF_HOME="+hub, "HF_HUB_OFFLINE=1")
			var stdout, stderr lockedBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			started := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if err := waitForMark(mark, exited, 5*time.Minute); err != nil {
				cmd.Process.Kill()
				t.Fatalf("%v; stderr %q", err, stderr.String())
			}
			toMark := time.Since(started)
			if made, _ := os.ReadDir(tmp); tc.name == "verify" && len(made) == 0 {
				t.Errorf("verify made no temporary source pack in $TMPDIR")
			}
			before := len(stderr.String())
			sent := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 30 s after %v; stderr %q", tc.sig, stderr.String())
			}
			took := time.Since(sent)
			t.Logf("%s: in a forward %.1f s after the start; stopped %v after %v: %q", tc.name, toMark.Seconds(), took.Round(time.Millisecond), tc.sig,
				strings.TrimSpace(stderr.String()[before:]))
			if took > time.Second {
				t.Errorf("took %v to stop after %v", took, tc.sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit code %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			all := stderr.String()
			after := strings.Split(strings.TrimRight(all[before:], "\n"), "\n")
			if len(after) != 1 || !strings.HasPrefix(after[0], tc.mention) {
				t.Errorf("stderr after the signal is not one line starting %q: %q", tc.mention, all[before:])
			}
			for _, l := range strings.Split(strings.TrimRight(all[:before], "\n"), "\n") {
				if l != "" && !strings.HasPrefix(l, "note: ") {
					t.Errorf("stderr before the signal holds more than notes: %q", l)
				}
			}
			switch {
			case tc.name == "run --json":
				var obj map[string]any
				if err := json.Unmarshal([]byte(stdout.String()), &obj); err != nil || obj["interrupted"] != true || obj["blocks"] != 0.0 {
					t.Errorf("run --json: stdout %q (%v), want one object with interrupted true and 0 blocks", stdout.String(), err)
				}
			case strings.Contains(stdout.String(), "FAIL"):
				t.Errorf("an interruption reported as a failure: %q", stdout.String())
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left in $TMPDIR: %v", left)
			}
			if got := dirState(t, pack); got != packBefore {
				t.Errorf("the pack folder changed:\n%s\nwas\n%s", got, packBefore)
			}
			if got := dirState(t, filepath.Dir(pack)); got != parentBefore {
				t.Errorf("the pack's parent folder changed:\n%s\nwas\n%s", got, parentBefore)
			}
		})
	}
}

// waitForMark waits until the file mark exists, failing when the process
// exits first or after limit.
func waitForMark(mark string, exited chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(mark); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("the command exited (%v) before its first forward", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("no forward started within %v", limit)
}
