package check

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/internal/errclass"
	"github.com/dgq-dev/dgq/runtime/internal/fixture"
)

// countingProgress records what a run tells its progress.
type countingProgress struct {
	phases []string
	added  int64
}

func (p *countingProgress) Start(phase string, _ int64) { p.phases = append(p.phases, phase) }
func (p *countingProgress) Add(n int64)                 { p.added += n }
func (p *countingProgress) Finish()                     {}

// deadPID is the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run a child process: %v", err)
	}
	return cmd.Process.Pid
}

// leftovers lists the folders of snapshot sources in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), verifyTempPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Issue 21: a snapshot source outside the hub cache was copied silently
// into $TMPDIR (≈ 50 GB for the real model), and a killed run left its
// folder there. The copy is now announced (Notify: one line with its size
// and folder), goes to --tmp (VerifyOptions.Tmp), reports its progress, and
// is removed at the end and on every error path (cancellation included); a
// later run removes the folders of runs whose process is gone, and leaves
// those of live ones.
func TestVerifyCopyAnnouncedAndRemoved(t *testing.T) {
	pack := fixture.PackDir(t, "tiny", "bf16")
	src := fixture.SnapshotDir(t, "tiny")
	tmp := t.TempDir()
	stale := filepath.Join(tmp, verifyTempPrefix+strconv.Itoa(deadPID(t))+"-123")
	live := filepath.Join(tmp, verifyTempPrefix+strconv.Itoa(os.Getppid())+"-456")
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "source.dgq"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var notes []string
	prog := &countingProgress{}
	o := quickVerify(VerifyOptions{Source: src, Tmp: tmp, Progress: prog, Generations: -1})
	o.Notify = func(s string) {
		notes = append(notes, s)
		if got := leftovers(t, tmp); len(got) != 2 { // the live run's and this run's
			t.Errorf("while copying, %s holds %v", tmp, got)
		}
	}
	r, err := Verify(context.Background(), pack, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.SourceKind != "snapshot_copy" {
		t.Fatalf("source kind %s", r.SourceKind)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], src) || !strings.Contains(notes[0], tmp) ||
		!strings.Contains(notes[0], "bytes") || !strings.Contains(notes[0], "--tmp") {
		t.Errorf("notes %q: want one naming the snapshot, the folder in --tmp and the size", notes)
	}
	if prog.added == 0 || len(prog.phases) == 0 {
		t.Errorf("the copy reported no progress: %+v", prog)
	}
	if got := leftovers(t, tmp); len(got) != 1 || got[0] != filepath.Base(live) {
		t.Errorf("after the run %s holds %v, want only the live run's folder", tmp, got)
	}

	// Canceled while copying: the error is the cancellation, nothing is left.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Notify = func(string) { cancel() }
	if _, err := Verify(ctx, pack, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled verify: %v", err)
	}
	if got := leftovers(t, tmp); len(got) != 1 {
		t.Errorf("after a canceled run %s holds %v", tmp, got)
	}
}

// Not enough free space for the copy is refused before anything is written,
// with both numbers and the --tmp fix (an I/O error).
func TestVerifyCopyChecksSpace(t *testing.T) {
	dir := t.TempDir()
	err := checkSpace(dir, 1<<61)
	if err == nil {
		t.Skip("free space cannot be told here")
	}
	if !errors.Is(err, ErrNoSpace) || errclass.Of(err) != errclass.IO ||
		!strings.Contains(err.Error(), "needs 2305843009.2 GB") || !strings.Contains(err.Error(), dir) ||
		!strings.Contains(err.Error(), "free") || !strings.Contains(err.Error(), "--tmp DIR") {
		t.Fatalf("checkSpace: %v", err)
	}
	if err := checkSpace(dir, 1); err != nil {
		t.Fatalf("one byte: %v", err)
	}
}
