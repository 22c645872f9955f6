package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/dgq/testmodel"
)

// fixtures are the checkpoints with transformers references: the embedded
// tiny one and the two in the module's testdata/.
var fixtures = []string{"tiny", "wide", "tiny-distinct"}

var (
	tmpRoot  string
	packMu   sync.Mutex
	packDirs = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dgq-runtime-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// snapshotDir returns the Hugging Face snapshot directory of a fixture.
func snapshotDir(t testing.TB, fixture string) string {
	t.Helper()
	if fixture == "tiny" {
		dir := filepath.Join(tmpRoot, "snap-tiny")
		packMu.Lock()
		defer packMu.Unlock()
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
			return dir
		}
		if _, err := testmodel.WriteSnapshot(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	repos, err := filepath.Glob(filepath.Join("..", "testdata", fixture, "hub", "models--*"))
	if err != nil || len(repos) != 1 {
		t.Fatalf("fixture %s: hub entry not found (%v)", fixture, err)
	}
	rev, err := os.ReadFile(filepath.Join(repos[0], "refs", "main"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(repos[0], "snapshots", strings.TrimSpace(string(rev)))
}

// refDir returns the directory holding a fixture's reference.json and
// reference.safetensors.
func refDir(t testing.TB, fixture string) string {
	t.Helper()
	if fixture != "tiny" {
		return filepath.Join("..", "testdata", fixture)
	}
	dir := filepath.Join(tmpRoot, "ref-tiny")
	packMu.Lock()
	defer packMu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "reference.safetensors")); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"reference.json", "reference.safetensors"} {
		b, err := testmodel.ReadReference(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// packDir quantizes a fixture with a profile once per test binary.
func packDir(t testing.TB, fixture, profile string, sets ...string) string {
	t.Helper()
	src := snapshotDir(t, fixture)
	key := fixture + "/" + profile + "/" + strings.Join(sets, ",")
	packMu.Lock()
	defer packMu.Unlock()
	if d, ok := packDirs[key]; ok {
		return d
	}
	out := filepath.Join(tmpRoot, strings.NewReplacer("/", "_", "=", "-", ",", "+").Replace(key)+".dgq")
	if _, err := dgq.Quantize(context.Background(), dgq.QuantizeOptions{Source: src, Out: out, Profile: profile, Sets: sets}); err != nil {
		t.Fatalf("quantize %s: %v", key, err)
	}
	packDirs[key] = out
	return out
}

// loadModel binds a fixture's pack; the pack stays open for the test.
func loadModel(t testing.TB, fixture, profile string, sets ...string) *Model {
	t.Helper()
	p, err := dgq.Open(packDir(t, fixture, profile, sets...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	m, err := Bind(PackWeights(p))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
