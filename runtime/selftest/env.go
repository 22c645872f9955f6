package selftest

import (
	"context"
	"runtime"
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
	// MemoryAvailableBytes is the memory the system says can be had
	// without swapping (Linux: MemAvailable of /proc/meminfo); 0 where it
	// does not say.
	MemoryAvailableBytes uint64 `json:"memory_available_bytes,omitempty"`
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
