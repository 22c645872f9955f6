package selftest

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/dgq"
)

// TestBuildFrom: every setting is kept in order, the VCS stamp is read
// into the commit fields, and an unstamped build says why it has no
// commit.
func TestBuildFrom(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	main := debug.Module{Path: "github.com/dgq-dev/dgq", Version: "(devel)"}
	stamped := []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "-tags", Value: "purego,x"},
		{Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"}, {Key: "GOARCH", Value: "arm64"},
		{Key: "GOOS", Value: "darwin"}, {Key: "GOARM64", Value: "v8.0"}, {Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name                 string
		bi                   *debug.BuildInfo
		commit, short, note  string
		modified             bool
		time, vcs, tags      string
		goos, goarch, module string
	}{
		{name: "stamped", bi: &debug.BuildInfo{GoVersion: "go1.26.1", Path: "github.com/dgq-dev/dgq/cmd/dgq", Main: main, Settings: stamped},
			commit: rev, short: rev[:12], modified: true, time: "2026-01-02T03:04:05Z", vcs: "git", tags: "purego,x",
			goos: "darwin", goarch: "arm64", module: "(devel)"},
		{name: "unstamped checkout", bi: &debug.BuildInfo{Main: main, Settings: []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}}},
			note: NoVCSStamp, goos: runtime.GOOS, goarch: runtime.GOARCH, module: "(devel)"},
		{name: "module version", bi: &debug.BuildInfo{Main: debug.Module{Path: main.Path, Version: "v1.2.3"}},
			note: NoVCSModule, goos: runtime.GOOS, goarch: runtime.GOARCH, module: "v1.2.3"},
		{name: "no build info", note: NoBuildInfo, goos: runtime.GOOS, goarch: runtime.GOARCH},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := buildFrom(tc.bi)
			if b.Version != dgq.Version || b.GoVersion == "" {
				t.Errorf("version %q go %q", b.Version, b.GoVersion)
			}
			if b.Commit != tc.commit || b.CommitShort != tc.short || b.CommitNote != tc.note || b.Modified != tc.modified ||
				b.Time != tc.time || b.VCS != tc.vcs || b.Tags != tc.tags {
				t.Errorf("build %+v", b)
			}
			if b.GOOS != tc.goos || b.GOARCH != tc.goarch || b.Module != tc.module {
				t.Errorf("target %s/%s module %q, want %s/%s %q", b.GOOS, b.GOARCH, b.Module, tc.goos, tc.goarch, tc.module)
			}
			var want []BuildSetting
			if tc.bi != nil {
				for _, s := range tc.bi.Settings {
					want = append(want, BuildSetting{s.Key, s.Value})
				}
				if tc.bi.GoVersion != "" && b.GoVersion != tc.bi.GoVersion {
					t.Errorf("go %q, want %q", b.GoVersion, tc.bi.GoVersion)
				}
			}
			if !slices.Equal(b.Settings, want) {
				t.Errorf("settings %v, want %v", b.Settings, want)
			}
		})
	}
}

// TestReadBuild: this binary's build is read whole: its settings are
// debug.ReadBuildInfo's, and the commit is its vcs.revision or, absent,
// explained.
func TestReadBuild(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build information in the test binary")
	}
	b := ReadBuild()
	if len(b.Settings) != len(bi.Settings) {
		t.Fatalf("%d settings, want %d", len(b.Settings), len(bi.Settings))
	}
	rev := ""
	for i, s := range bi.Settings {
		if b.Settings[i] != (BuildSetting{s.Key, s.Value}) {
			t.Errorf("setting %d = %v, want %v", i, b.Settings[i], s)
		}
		if s.Key == "vcs.revision" {
			rev = s.Value
		}
	}
	if b.Commit != rev || (rev == "") == (b.CommitNote == "") {
		t.Errorf("commit %q note %q, vcs.revision %q", b.Commit, b.CommitNote, rev)
	}
}
