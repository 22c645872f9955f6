package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/selftest"
)

// doctorEnv points the hub cache and the home folder at fresh directories
// and clears the token variables; it returns the cache and the home.
func doctorEnv(t *testing.T) (cache, home string) {
	t.Helper()
	cache, home = t.TempDir(), t.TempDir()
	for _, v := range []string{hfcache.EnvDGQHFHome, selftest.EnvHFToken, selftest.EnvHFTokenLegacy, selftest.EnvHFTokenPath,
		hfcache.EnvHFHome, hfcache.EnvXDGCacheHome} {
		t.Setenv(v, "")
	}
	t.Setenv(hfcache.EnvHFHubCache, cache)
	t.Setenv("HOME", home)
	return cache, home
}

// TestDoctorJSON: doctor --json is one report: every backend built in,
// usable or with its reason (cpu usable), the cache root of
// hfcache.CacheRoot, the codecs' kernels, the free disk, the build.
func TestDoctorJSON(t *testing.T) {
	cache, _ := doctorEnv(t)
	r := dgqRun("doctor", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("doctor --json: %d %s", r.code, r.stderr)
	}
	var rep selftest.DoctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not one JSON report: %v\n%s", err, r.stdout)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"environment", "cpu_features", "codec_kernels", "backends", "hf_cache", "hf_token", "work_dir", "dgq", "elapsed_s"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no key %q", k)
		}
	}
	var names []string
	for i, b := range rep.Backends {
		names = append(names, b.Name)
		bm := raw["backends"].([]any)[i].(map[string]any)
		if _, ok := bm["usable"].(bool); !ok {
			t.Errorf("backend %s has no usable bool: %v", b.Name, bm)
		}
		if !b.Usable && strings.TrimSpace(b.Reason) == "" {
			t.Errorf("backend %s unusable without a reason", b.Name)
		}
		if b.Name == "cpu" && !b.Usable {
			t.Errorf("cpu backend unusable: %s", b.Reason)
		}
	}
	if !slices.Equal(names, backend.Names()) {
		t.Errorf("backends %v, want backend.Names() %v", names, backend.Names())
	}
	dir, source := hfcache.CacheRoot()
	if rep.HFCache.Dir != dir || dir != cache || rep.HFCache.Source != source || !rep.HFCache.Exists {
		t.Errorf("hf_cache %+v, want %s from %s", rep.HFCache, dir, source)
	}
	if len(rep.CodecKernels) == 0 || !slices.Equal(rep.CodecKernels, codecs.Kernels()) {
		t.Errorf("codec_kernels %+v, want %+v", rep.CodecKernels, codecs.Kernels())
	}
	if runtime.GOOS == "linux" && (rep.WorkDir.FreeBytes == 0 || rep.HFCache.Disk.FreeBytes == 0) {
		t.Errorf("no free disk measured: work_dir %+v, cache %+v", rep.WorkDir, rep.HFCache.Disk)
	}
	if rep.Build.Version != dgq.Version || rep.Environment.OS != runtime.GOOS || rep.Environment.Arch != runtime.GOARCH {
		t.Errorf("dgq %+v environment %+v", rep.Build, rep.Environment)
	}
}

// TestDoctorToken: the token is reported present, with where from, or
// absent — in text and in JSON — and never printed.
func TestDoctorToken(t *testing.T) {
	const secret = "hf_secret123"
	tests := []struct {
		name    string
		setup   func(t *testing.T, home string) string // returns the token file, if any
		text    string
		present bool
		source  string
	}{
		{"HF_TOKEN", func(t *testing.T, home string) string {
			t.Setenv(selftest.EnvHFToken, secret)
			return ""
		}, "present (from HF_TOKEN)", true, selftest.EnvHFToken},
		{"file under HF_HOME", func(t *testing.T, home string) string {
			hf := filepath.Join(home, "hf")
			t.Setenv(hfcache.EnvHFHome, hf)
			t.Setenv(hfcache.EnvHFHubCache, filepath.Join(hf, "hub"))
			p := filepath.Join(hf, "token")
			if err := os.MkdirAll(hf, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "present (file FILE)", true, selftest.TokenSourceFile},
		{"absent", func(t *testing.T, home string) string {
			t.Setenv(hfcache.EnvHFHome, filepath.Join(home, "empty"))
			return ""
		}, "absent (", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, home := doctorEnv(t)
			file := tc.setup(t, home)
			want := strings.ReplaceAll(tc.text, "FILE", file)
			text := dgqRun("doctor")
			js := dgqRun("doctor", "--json")
			if text.code != 0 || js.code != 0 {
				t.Fatalf("doctor: %d %s; --json: %d %s", text.code, text.stderr, js.code, js.stderr)
			}
			for _, out := range []string{text.stdout, text.stderr, js.stdout, js.stderr} {
				if strings.Contains(out, secret) || strings.Contains(out, "secret123") {
					t.Fatalf("the token leaked:\n%s", out)
				}
			}
			if !strings.Contains(text.stdout, "hf token") || !strings.Contains(text.stdout, want) {
				t.Errorf("text lacks %q:\n%s", want, text.stdout)
			}
			var rep selftest.DoctorReport
			if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.HFToken.Present != tc.present || rep.HFToken.Source != tc.source || (file != "" && rep.HFToken.File != file) {
				t.Errorf("hf_token %+v, want present %v source %q file %q", rep.HFToken, tc.present, tc.source, file)
			}
		})
	}
}

// TestDoctorText: one fact per line, exit 0 even with backends that cannot
// run here (their reasons on their lines); an argument is a usage error.
func TestDoctorText(t *testing.T) {
	doctorEnv(t)
	r := dgqRun("doctor")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("doctor: %d %s", r.code, r.stderr)
	}
	for _, w := range []string{"dgq ", "os ", "kernel ", "cpu features ", "memory ", "hf cache ", "hf token ", "disk at hf cache ", "disk at work dir "} {
		if !strings.Contains(r.stdout, "\n"+w) && !strings.HasPrefix(r.stdout, w) {
			t.Errorf("no %q line:\n%s", w, r.stdout)
		}
	}
	for _, k := range codecs.Kernels() {
		if !strings.Contains(r.stdout, "codec kernel ") || !strings.Contains(r.stdout, k.Name+": "+k.Impl) {
			t.Errorf("no codec kernel line for %+v:\n%s", k, r.stdout)
		}
	}
	for _, n := range backend.Names() {
		i := strings.Index(r.stdout, "backend "+n+" ")
		if i < 0 {
			t.Errorf("no line for backend %s:\n%s", n, r.stdout)
			continue
		}
		l, _, _ := strings.Cut(r.stdout[i:], "\n")
		if !strings.Contains(l, "usable (") && !strings.Contains(l, "unusable: ") {
			t.Errorf("backend line %q says neither usable nor why not", l)
		}
		if n == "cpu" && !strings.Contains(l, " usable (f32)") {
			t.Errorf("cpu backend line %q", l)
		}
	}
	assertOneLineError(t, dgqRun("doctor", "extra"), exitUsage, "doctor")
}
