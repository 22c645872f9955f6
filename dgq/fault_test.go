package dgq

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// faultyBlob fails every write after the first n with err.
type faultyBlob struct {
	blobFile
	n   int
	err error
}

func (f *faultyBlob) WriteAt(b []byte, off int64) (int, error) {
	if f.n <= 0 {
		return 0, &fs.PathError{Op: "write", Path: "model.dgq.bin", Err: f.err}
	}
	f.n--
	return f.blobFile.WriteAt(b, off)
}

// A write error (disk full, I/O error) at any point surfaces as a clear error
// and publishes nothing.
func TestWriteFaultPublishesNothing(t *testing.T) {
	src := tinySnapshot(t)
	for _, after := range []int{0, 1, 10, 40} {
		for _, fault := range []error{syscall.ENOSPC, syscall.EIO} {
			orig := createBlob
			createBlob = func(path string) (blobFile, error) {
				f, err := orig(path)
				return &faultyBlob{blobFile: f, n: after, err: fault}, err
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q4"})
			createBlob = orig
			if !errors.Is(err, fault) || !strings.Contains(err.Error(), fault.Error()) {
				t.Fatalf("fault %v after %d writes: %v", fault, after, err)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				t.Errorf("fault not reported as a path error: %v", err)
			}
			assertNoOutput(t, out)
		}
	}
}

// A mapped source that shrinks under the reader faults; the fault becomes an
// error naming what was read instead of a crash.
func TestMappedSourceFaultIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(p)
	defer f.Close()
	b, err := mapFile(f, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapFile(b)
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	err = guardFault("tensor x", func() error {
		for i := 0; i < len(b); i += 4096 {
			faultSink += b[i]
		}
		return nil
	})
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "tensor x") {
		t.Fatalf("fault: %v", err)
	}
}

// Staging directories of killed runs are removed by the next run in the same
// parent folder, whatever output they were for, and listed; those of live
// processes are not, nor folders that merely look alike.
func TestStaleStagingRemoved(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "pack")
	dead := filepath.Join(parent, stagingPrefix(out)+"999999999-123")
	deadOther := filepath.Join(parent, stagingPrefix(filepath.Join(parent, "other.dgq"))+"999999998-7")
	live := filepath.Join(parent, stagingPrefix(out)+strconv.Itoa(os.Getpid())+"-456")
	keep := []string{live, filepath.Join(parent, "visible.dgq-tmp-999999999-1"), filepath.Join(parent, ".x.dgq-tmp-notapid-1")}
	for _, d := range append([]string{dead, deadOther}, keep...) {
		os.MkdirAll(d, 0o755)
	}
	st, err := NewStaging(out, false)
	if err != nil {
		t.Fatal(err)
	}
	st.Abort()
	for _, d := range []string{dead, deadOther} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("staging directory of a dead process survived: %s", filepath.Base(d))
		}
	}
	for _, d := range keep {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed", filepath.Base(d))
		}
	}
	got := st.RemovedStale()
	slices.Sort(got)
	want := []string{dead, deadOther}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("RemovedStale = %v, want %v", got, want)
	}
}

// Quantize reports the stale staging folders it removed.
func TestQuantizeReportsRemovedStaging(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "pack")
	stale := filepath.Join(parent, stagingPrefix(filepath.Join(parent, "killed"))+"999999999-1")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Quantize(context.Background(), QuantizeOptions{Source: tinySnapshot(t), Out: out, Profile: "q4"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.RemovedStaging, []string{stale}) {
		t.Errorf("RemovedStaging = %v, want [%s]", res.RemovedStaging, stale)
	}
}

var faultSink byte
