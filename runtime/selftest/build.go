package selftest

import (
	"runtime"
	"runtime/debug"

	"github.com/dgq-dev/dgq/dgq"
)

// Build is the dgq binary that ran: dgq version's report, and the "dgq"
// object of the self-test's and the doctor's reports.
type Build struct {
	// Version is the release (dgq.Version).
	Version string `json:"version"`
	// Commit is the VCS revision built ("" when the build recorded none:
	// go install of a module version, -buildvcs=false, go run, a tree
	// without git; CommitNote then says so), CommitShort its first 12
	// characters (what dgq --version prints), Modified whether the tree
	// had changes, Time the commit's time (RFC 3339), VCS the system
	// ("git").
	Commit      string `json:"commit,omitempty"`
	CommitShort string `json:"commit_short,omitempty"`
	Modified    bool   `json:"modified,omitempty"`
	Time        string `json:"commit_time,omitempty"`
	VCS         string `json:"vcs,omitempty"`
	// CommitNote says why Commit is empty; "" when it is not.
	CommitNote string `json:"commit_note,omitempty"`
	// GoVersion is the Go toolchain that built the binary, GOOS and GOARCH
	// its target.
	GoVersion string `json:"go"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	// Path is the main package's import path and ModulePath its module's.
	Path       string `json:"path,omitempty"`
	ModulePath string `json:"module_path,omitempty"`
	// Module is the module version go install recorded ("(devel)" for a
	// build in a checkout).
	Module string `json:"module,omitempty"`
	// Tags are the build tags.
	Tags string `json:"tags,omitempty"`
	// Settings are every build setting the binary records, in its order
	// (-buildmode, -compiler, -tags, -trimpath, -ldflags, CGO_ENABLED,
	// CGO_CFLAGS…, GOARCH, GOOS, GOAMD64 or GOARM64, vcs…); the toolchain
	// leaves out those at their defaults and -ldflags under -trimpath.
	Settings []BuildSetting `json:"settings,omitempty"`
}

// BuildSetting is one build setting (debug.BuildSetting).
type BuildSetting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Why Build.Commit is empty (Build.CommitNote).
const (
	// NoBuildInfo: the binary holds no build information at all.
	NoBuildInfo = "the binary holds no build information"
	// NoVCSStamp: a build of a checkout that recorded no VCS information.
	// The toolchain does not record why: -buildvcs=false (also through
	// GOFLAGS), go run and go test, or a tree without git.
	NoVCSStamp = "built without VCS stamping: -buildvcs=false, go run or go test, or outside a git checkout"
	// NoVCSModule: go install of a module version, which records the
	// version, not a commit.
	NoVCSModule = "installed as a module version, which records no commit"
)

// commitShortLen is the length of Build.CommitShort.
const commitShortLen = 12

// ReadBuild describes this binary from its build information
// (debug.ReadBuildInfo).
func ReadBuild() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return buildFrom(bi)
}

// buildFrom describes a binary from its build information (nil: none).
func buildFrom(bi *debug.BuildInfo) Build {
	b := Build{Version: dgq.Version, GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if bi == nil {
		b.CommitNote = NoBuildInfo
		return b
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	b.Path, b.ModulePath, b.Module = bi.Path, bi.Main.Path, bi.Main.Version
	for _, s := range bi.Settings {
		b.Settings = append(b.Settings, BuildSetting{Key: s.Key, Value: s.Value})
		switch s.Key {
		case "vcs":
			b.VCS = s.Value
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			b.Time = s.Value
		case "-tags":
			b.Tags = s.Value
		case "GOOS":
			b.GOOS = s.Value
		case "GOARCH":
			b.GOARCH = s.Value
		}
	}
	switch {
	case b.Commit != "":
		b.CommitShort = b.Commit[:min(commitShortLen, len(b.Commit))]
	case b.Module != "" && b.Module != "(devel)":
		b.CommitNote = NoVCSModule
	default:
		b.CommitNote = NoVCSStamp
	}
	return b
}
