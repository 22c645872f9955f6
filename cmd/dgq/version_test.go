package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/runtime/selftest"
)

// TestVersionJSON: dgq version --json is one object with the build's keys;
// its commit is debug.ReadBuildInfo's vcs.revision, or absent and
// explained; its settings are every setting the binary records.
func TestVersionJSON(t *testing.T) {
	r := dgqRun("version", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("version --json: %d %s", r.code, r.stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, r.stdout)
	}
	for key, want := range map[string]any{"version": dgq.Version, "go": runtime.Version(), "goos": runtime.GOOS, "goarch": runtime.GOARCH} {
		if v[key] != want {
			t.Errorf("%s = %v, want %v", key, v[key], want)
		}
	}
	rev, settings := "", 0
	if bi, ok := debug.ReadBuildInfo(); ok {
		settings = len(bi.Settings)
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	if rev != "" {
		if v["commit"] != rev || v["commit_short"] != rev[:12] || v["commit_note"] != nil {
			t.Errorf("commit %v short %v note %v, want %s", v["commit"], v["commit_short"], v["commit_note"], rev)
		}
	} else if v["commit"] != nil || v["commit_short"] != nil || v["commit_note"] == nil || v["commit_note"] == "" {
		t.Errorf("commit %v short %v note %v: no vcs.revision recorded, want no commit and a note", v["commit"], v["commit_short"], v["commit_note"])
	}
	if s, _ := v["settings"].([]any); len(s) != settings {
		t.Errorf("%d settings, want %d", len(s), settings)
	}
}

// TestRenderVersion: the text names the commit in full when there is one,
// and says "unknown" and why when there is none.
func TestRenderVersion(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name     string
		b        selftest.Build
		want     []string
		not      []string
		wantLine string // dgq --version
	}{
		{"stamped", selftest.Build{Version: "1.2.3", Commit: rev, CommitShort: rev[:12], Modified: true, Time: "2026-01-02T03:04:05Z",
			GoVersion: "go1.26.1", GOOS: "linux", GOARCH: "arm64", Settings: []selftest.BuildSetting{{Key: "-tags", Value: "purego"}, {Key: "GOARM64", Value: "v8.0"}}},
			[]string{"version       1.2.3\n", "commit        " + rev + "\n", "commit short  " + rev[:12] + "\n", "modified      yes",
				"commit time   2026-01-02T03:04:05Z\n", "target        linux/arm64\n", "setting       -tags=purego\n", "setting       GOARM64=v8.0\n"},
			[]string{"unknown"}, "1.2.3 (" + rev[:12] + ")"},
		{"unstamped", selftest.Build{Version: "1.2.3", CommitNote: selftest.NoVCSStamp, GoVersion: "go1.26.1", GOOS: "linux", GOARCH: "amd64"},
			[]string{"commit   unknown (built without VCS stamping: -buildvcs=false"},
			[]string{"commit time", "modified", "commit short"}, "1.2.3"},
		{"no note", selftest.Build{Version: "1.2.3"}, []string{"commit   unknown\n"}, nil, "1.2.3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			renderVersion(&sb, tc.b)
			out := sb.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("text lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("text has %q:\n%s", n, out)
				}
			}
			if got := versionLine(tc.b); got != tc.wantLine {
				t.Errorf("versionLine = %q, want %q", got, tc.wantLine)
			}
		})
	}
}

// TestVersionCommands: dgq version prints the build, dgq --version the
// release, and an argument is a usage error.
func TestVersionCommands(t *testing.T) {
	b := selftest.ReadBuild()
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"version"}, 0, []string{"version  ", dgq.Version, "commit  ", commitText(b), "go  ", runtime.Version()}},
		{[]string{"--version"}, 0, []string{versionLine(b)}},
		{[]string{"version", "extra"}, exitUsage, nil},
	}
	for _, tc := range tests {
		r := dgqRun(tc.args...)
		if r.code != tc.code {
			t.Errorf("dgq %v: exit %d, want %d (%s)", tc.args, r.code, tc.code, r.stderr)
		}
		if tc.code == exitUsage {
			assertOneLineError(t, r, exitUsage, "version")
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("dgq %v lacks %q:\n%s", tc.args, w, r.stdout)
			}
		}
	}
}
