package selftest

import (
	"context"
	"runtime"
	"runtime/debug"

	"github.com/dgq-dev/dgq/dgq"
)

// Environment is the machine the self-test ran on. A field the system does
// not tell is empty.
type Environment struct {
	OS string `json:"os"` // runtime.GOOS
	// OSVersion is the release ("macOS 15.3.1 (24D70)", "Debian GNU/Linux
	// 12 (bookworm)") and Kernel the kernel's.
	OSVersion   string `json:"os_version,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	Arch        string `json:"arch"`
	CPU         string `json:"cpu,omitempty"`
	CPUs        int    `json:"cpus"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	// GPUs are the system's own description of its graphics hardware
	// (macOS: system_profiler SPDisplaysDataType), beside the backend's
	// (Report.Backend.Device).
	GPUs []SystemGPU `json:"system_gpus,omitempty"`
}

// SystemGPU is a GPU as the operating system lists it.
type SystemGPU struct {
	Model  string `json:"model"`
	Cores  string `json:"cores,omitempty"`
	Vendor string `json:"vendor,omitempty"`
	Metal  string `json:"metal_support,omitempty"`
}

// collectEnvironment describes this machine (platform parts in env_*.go).
func collectEnvironment(ctx context.Context) Environment {
	e := Environment{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	describeSystem(ctx, &e)
	return e
}

// Build is the dgq binary that ran.
type Build struct {
	Version string `json:"version"`
	// Commit is the VCS revision built ("" when the build recorded none:
	// go install of a module version, or -buildvcs=false), Modified whether
	// the tree had changes, Time the commit's time.
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	Time      string `json:"commit_time,omitempty"`
	GoVersion string `json:"go"`
	// Module is the module version go install recorded ("(devel)" for a
	// build in a checkout).
	Module string `json:"module,omitempty"`
	// Tags are the build tags.
	Tags string `json:"tags,omitempty"`
}

// readBuild reads the binary's build information.
func readBuild() Build {
	b := Build{Version: dgq.Version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Module = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			b.Time = s.Value
		case "-tags":
			b.Tags = s.Value
		}
	}
	return b
}
