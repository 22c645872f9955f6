package selftest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/cpu"
)

// tokenEnv clears every variable of the token lookup and points the home
// folder at a fresh directory, which it returns.
func tokenEnv(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for _, v := range []string{EnvHFToken, EnvHFTokenLegacy, EnvHFTokenPath, hfcache.EnvHFHome, hfcache.EnvXDGCacheHome} {
		t.Setenv(v, "")
	}
	t.Setenv("HOME", home)
	return home
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFindToken: the token is found where huggingface_hub looks, in its
// order, and never kept.
func TestFindToken(t *testing.T) {
	const secret = "hf_secret123"
	tests := []struct {
		name string
		// setup sets the environment and returns the token file expected
		// (where the lookup reads it).
		setup              func(t *testing.T, home string) string
		present            bool
		source, fileSource string
		errs               bool
	}{
		{"none", func(t *testing.T, home string) string {
			return filepath.Join(home, ".cache", "huggingface", "token")
		}, false, "", hfcache.SourceDefault, false},
		{"HF_TOKEN", func(t *testing.T, home string) string {
			t.Setenv(EnvHFToken, secret)
			t.Setenv(EnvHFTokenLegacy, "hf_other")
			return filepath.Join(home, ".cache", "huggingface", "token")
		}, true, EnvHFToken, hfcache.SourceDefault, false},
		{"legacy variable", func(t *testing.T, home string) string {
			t.Setenv(EnvHFTokenLegacy, secret)
			return filepath.Join(home, ".cache", "huggingface", "token")
		}, true, EnvHFTokenLegacy, hfcache.SourceDefault, false},
		{"blank HF_TOKEN falls through to the file, not the legacy variable", func(t *testing.T, home string) string {
			t.Setenv(EnvHFToken, " \r\n")
			t.Setenv(EnvHFTokenLegacy, secret)
			return writeFile(t, filepath.Join(home, ".cache", "huggingface", "token"), secret+"\n")
		}, true, TokenSourceFile, hfcache.SourceDefault, false},
		{"default file", func(t *testing.T, home string) string {
			return writeFile(t, filepath.Join(home, ".cache", "huggingface", "token"), secret+"\n")
		}, true, TokenSourceFile, hfcache.SourceDefault, false},
		{"HF_HOME file", func(t *testing.T, home string) string {
			t.Setenv(hfcache.EnvHFHome, filepath.Join(home, "hf"))
			writeFile(t, filepath.Join(home, ".cache", "huggingface", "token"), "") // not read
			return writeFile(t, filepath.Join(home, "hf", "token"), secret)
		}, true, TokenSourceFile, hfcache.EnvHFHome, false},
		{"HF_HOME with ~ and HF_TOKEN_PATH first", func(t *testing.T, home string) string {
			t.Setenv(hfcache.EnvHFHome, "~/hf")
			writeFile(t, filepath.Join(home, "hf", "token"), secret)
			t.Setenv("DGQ_TEST_TOKEN_DIR", filepath.Join(home, "elsewhere"))
			t.Setenv(EnvHFTokenPath, "$DGQ_TEST_TOKEN_DIR/tok")
			return filepath.Join(home, "elsewhere", "tok")
		}, false, "", EnvHFTokenPath, false},
		{"XDG_CACHE_HOME file", func(t *testing.T, home string) string {
			t.Setenv(hfcache.EnvXDGCacheHome, filepath.Join(home, "xdg"))
			return writeFile(t, filepath.Join(home, "xdg", "huggingface", "token"), "\n"+secret+"\n")
		}, true, TokenSourceFile, hfcache.EnvXDGCacheHome, false},
		{"blank file", func(t *testing.T, home string) string {
			return writeFile(t, filepath.Join(home, ".cache", "huggingface", "token"), " \n\r\n")
		}, false, "", hfcache.SourceDefault, false},
		{"unreadable file", func(t *testing.T, home string) string {
			p := filepath.Join(home, "tokdir")
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv(EnvHFTokenPath, p)
			return p
		}, false, "", EnvHFTokenPath, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home := tokenEnv(t)
			file := tc.setup(t, home)
			tok := findToken()
			if tok.Present != tc.present || tok.Source != tc.source || tok.File != file || tok.FileSource != tc.fileSource ||
				(tok.Error != "") != tc.errs {
				t.Errorf("findToken() = %+v, want present %v source %q file %q (%s), error %v", tok, tc.present, tc.source, file, tc.fileSource, tc.errs)
			}
			b, err := json.Marshal(tok)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "secret") {
				t.Errorf("the token leaked: %s", b)
			}
		})
	}
}

// TestMeasureDisk: the free space of an existing folder, of a path not
// made yet (its deepest existing ancestor), and none for no path.
func TestMeasureDisk(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path, at string
	}{
		{dir, dir},
		{filepath.Join(dir, "not", "yet"), dir},
	} {
		d := measureDisk(tc.path)
		if d.Path != tc.path || d.MeasuredAt != tc.at {
			t.Errorf("measureDisk(%s) = %+v, want measured at %s", tc.path, d, tc.at)
		}
		switch runtime.GOOS {
		case "linux", "darwin", "freebsd":
			if d.Error != "" || d.FreeBytes == 0 || d.TotalBytes < d.FreeBytes {
				t.Errorf("measureDisk(%s) = %+v", tc.path, d)
			}
		default:
			if d.Error == "" {
				t.Errorf("measureDisk(%s) = %+v, want unknown", tc.path, d)
			}
		}
	}
	if d := measureDisk(""); d.Error == "" || d.FreeBytes != 0 {
		t.Errorf("measureDisk(\"\") = %+v", d)
	}
}

// closeSpy is the CPU backend, telling when it is closed.
type closeSpy struct {
	*cpu.Backend
	closed chan struct{}
}

func (c closeSpy) Close() error { close(c.closed); return nil }

// TestOpenWith: a backend that opens is described; one that fails gives
// its reason and error; one that hangs is given up at the context's end,
// with its reason, and closed when it opens after all.
func TestOpenWith(t *testing.T) {
	b, info, err := openWith(context.Background(), "x", backend.Config{}, func(string, backend.Config) (backend.Backend, error) {
		return cpu.New(1), nil
	})
	if err != nil || b == nil || !info.Available || info.Precision != backend.F32 || info.Numerics == nil || info.Reason != "" {
		t.Errorf("opened: %+v, %v", info, err)
	}
	errNo := errors.New("no device\nhere")
	_, info, err = openWith(context.Background(), "x", backend.Config{}, func(string, backend.Config) (backend.Backend, error) {
		return nil, errors.Join(backend.ErrUnavailable, errNo)
	})
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, errNo) || info.Available || !strings.Contains(info.Reason, "no device here") {
		t.Errorf("failed: %+v, %v", info, err)
	}
	_, info, err = openWith(context.Background(), "x", backend.Config{}, func(string, backend.Config) (backend.Backend, error) {
		return nil, nil
	})
	if !errors.Is(err, backend.ErrUnavailable) || info.Available || info.Reason == "" {
		t.Errorf("no backend: %+v, %v", info, err)
	}

	release, spy := make(chan struct{}), closeSpy{cpu.New(1), make(chan struct{})}
	cause := errors.New("no answer in time")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 20*time.Millisecond, cause)
	defer cancel()
	_, info, err = openWith(ctx, "x", backend.Config{}, func(string, backend.Config) (backend.Backend, error) {
		<-release
		return spy, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || info.Available || !strings.Contains(info.Reason, cause.Error()) {
		t.Errorf("hung: %+v, %v", info, err)
	}
	close(release)
	select {
	case <-spy.closed:
	case <-time.After(10 * time.Second):
		t.Error("the backend that opened late was not closed")
	}
}

// TestDoctor: every registered backend is reported, usable or with its
// reason; the cache root is hfcache.CacheRoot's; the codec kernels are the
// codecs'.
func TestDoctor(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(hfcache.EnvDGQHFHome, "")
	t.Setenv(hfcache.EnvHFHubCache, cache)
	r, err := Doctor(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range r.Backends {
		names = append(names, b.Name)
		if b.Usable == (b.Reason != "") {
			t.Errorf("backend %+v: usable or a reason, not both", b)
		}
		switch b.Name {
		case "cpu", "selftest-broken":
			if !b.Usable {
				t.Errorf("backend %+v not usable", b)
			}
		case "selftest-absent":
			if b.Usable || !strings.Contains(b.Reason, "no such device") {
				t.Errorf("backend %+v", b)
			}
		}
	}
	if !slices.Equal(names, backend.Names()) {
		t.Errorf("backends %v, want %v", names, backend.Names())
	}
	dir, source := hfcache.CacheRoot()
	if r.HFCache.Dir != dir || r.HFCache.Source != hfcache.EnvHFHubCache || !r.HFCache.Exists || r.HFCache.Disk.MeasuredAt != cache {
		t.Errorf("hf cache %+v, want %s (%s)", r.HFCache, dir, source)
	}
	if !slices.Equal(r.CodecKernels, codecs.Kernels()) || len(r.CodecKernels) == 0 {
		t.Errorf("codec kernels %+v", r.CodecKernels)
	}
	if r.Environment.OS != runtime.GOOS || r.Build.GOARCH != runtime.GOARCH || r.WorkDir.Path == "" {
		t.Errorf("report %+v", r)
	}
	if runtime.GOARCH == "amd64" && !slices.Contains(r.CPUFeatures, "sse2") {
		t.Errorf("cpu features %v lack sse2", r.CPUFeatures)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Doctor(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Doctor(canceled) = %v", err)
	}
}

// TestExpandPath: ~ and set variables are expanded as Python does; unset
// ones are left.
