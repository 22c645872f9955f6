package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/dgq"
)

// TestMain lets the tests run this very binary as the dgq command in a child
// process (DGQ_TEST_MAIN=1), so it can be killed and interrupted for real.
func TestMain(m *testing.M) {
	if os.Getenv("DGQ_TEST_MAIN") == "1" {
		registerMarkBackend() // interrupt_test.go: DGQ_TEST_MARK
		main()
		return
	}
	code := m.Run()
	if synthDir != "" {
		os.RemoveAll(filepath.Dir(synthDir))
	}
	os.Exit(code)
}

var (
	synthOnce sync.Once
	synthDir  string
	synthErr  error
)

func child(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DGQ_TEST_MAIN=1")
	return cmd
}

// realShapeSource synthesizes a 1-layer checkpoint at the real dimensions
// (about 3 GB): quantizing it takes seconds, long enough to interrupt.
func realShapeSource(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("writes a 3 GB checkpoint")
	}
	return synthSource(t)
}

// synthSource is realShapeSource under -short too (a test that takes less
// than a minute with it).
func synthSource(t *testing.T) string {
	t.Helper()
	synthOnce.Do(func() {
		root, err := os.MkdirTemp("", "dgq-kill-test-")
		if err != nil {
			synthErr = err
			return
		}
		synthDir = filepath.Join(root, "synth")
		_, synthErr = dgq.Synthesize(context.Background(), dgq.SynthOptions{Out: synthDir, Layers: 1, Seed: 3})
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthDir
}

func stagingLeft(t *testing.T, parent string) []string {
	entries, _ := os.ReadDir(parent)
	var left []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".dgq-tmp-") {
			left = append(left, e.Name())
		}
	}
	return left
}

// SIGKILL at several moments of a real quantize leaves either no pack or a
// pack identical to an uninterrupted run, never anything else; the next run
// cleans up the killed run's staging directory.
func TestKillAtAnyMomentLeavesNothingOrTheWholePack(t *testing.T) {
	src := realShapeSource(t)
	parent := t.TempDir()
	ref := filepath.Join(parent, "reference")
	if out, err := child("quantize", "--profile", "q4", "-m", src, "-o", ref).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v %s", err, out)
	}
	want, _ := os.ReadFile(filepath.Join(ref, dgq.ManifestName))
	for _, delay := range []time.Duration{50 * time.Millisecond, 400 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second, 6 * time.Second} {
		out := filepath.Join(parent, "killed")
		os.RemoveAll(out)
		cmd := child("quantize", "--profile", "q4", "-m", src, "-o", out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if _, err := os.Stat(out); err != nil {
			continue // absent: fine
		}
		got, err := os.ReadFile(filepath.Join(out, dgq.ManifestName))
		if err != nil {
			t.Fatalf("killed after %v: %s exists without a manifest", delay, out)
		}
		// Same tensors, digests and layout as the uninterrupted run (only the source path may differ).
		gm, _ := dgq.ParseManifest(got)
		wm, _ := dgq.ParseManifest(want)
		gm.SourceModel, wm.SourceModel = "", ""
		a, _ := gm.Marshal()
		b, _ := wm.Marshal()
		if !bytes.Equal(a, b) {
			t.Fatalf("killed after %v: published pack differs from the uninterrupted one", delay)
		}
		rep, err := dgq.Audit(context.Background(), out, dgq.AuditOptions{})
		if err != nil || !rep.OK {
			t.Fatalf("killed after %v: published pack does not audit: %v %v", delay, err, rep)
		}
	}
	// A new run removes the staging directories the killed runs left.
	final := filepath.Join(parent, "killed")
	os.RemoveAll(final)
	if out, err := child("quantize", "--profile", "q4", "-m", src, "-o", final).CombinedOutput(); err != nil {
		t.Fatalf("run after kills: %v %s", err, out)
	}
	if left := stagingLeft(t, parent); len(left) != 0 {
		t.Fatalf("staging directories left after a clean run: %v", left)
	}
}

// SIGINT and SIGTERM cancel promptly, remove the staging directory and exit
// 130 or 143 with one line saying so.
func TestInterruptCancelsPromptly(t *testing.T) {
	src := realShapeSource(t)
	for sig, want := range map[os.Signal]int{os.Interrupt: exitCanceled, syscall.SIGTERM: exitTerminated} {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		cmd := child("quantize", "--profile", "q4", "-m", src, "-o", out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		sent := time.Now()
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		took := time.Since(sent)
		code := cmd.ProcessState.ExitCode()
		if err == nil || code != want {
			t.Fatalf("%v: exit %d (%v), stderr %q", sig, code, err, stderr.String())
		}
		if took > time.Second {
			t.Errorf("%v: took %v to stop", sig, took)
		}
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "dgq: quantize: interrupted by SIG") {
			t.Errorf("%v: stderr %q", sig, stderr.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: output exists after cancel", sig)
		}
		if left := stagingLeft(t, parent); len(left) != 0 {
			t.Errorf("%v: staging left: %v", sig, left)
		}
		t.Logf("%v: stopped %v after the signal", sig, took)
	}
}
