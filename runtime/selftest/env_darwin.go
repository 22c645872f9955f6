package selftest

import (
	"context"
	"encoding/json"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgq-dev/dgq/runtime/session"
)

// describeSystem reads sysctl (the macOS release and build, the CPU, the
// memory) and system_profiler's description of the GPUs (their core count,
// which Metal does not report), best effort and within 15 s.
func describeSystem(ctx context.Context, e *Environment) {
	if v, err := unix.Sysctl("kern.osproductversion"); err == nil {
		e.OSVersion = "macOS " + v
		if b, err := unix.Sysctl("kern.osversion"); err == nil {
			e.OSVersion += " (" + b + ")"
		}
	}
	if r, err := unix.Sysctl("kern.osrelease"); err == nil {
		e.Kernel = "Darwin " + r
	}
	if c, err := unix.Sysctl("machdep.cpu.brand_string"); err == nil {
		e.CPU = c
	}
	e.MemoryBytes, e.MemoryAvailableBytes = session.HostMemory() // what the memory estimate checks against
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/sbin/system_profiler", "SPDisplaysDataType", "-json").Output()
	if err != nil {
		return
	}
	var sp struct {
		Displays []struct {
			Model  string `json:"sppci_model"`
			Cores  string `json:"sppci_cores"`
			Vendor string `json:"spdisplays_vendor"`
			Metal  string `json:"spdisplays_mtlgpufamilysupport"`
		} `json:"SPDisplaysDataType"`
	}
	if json.Unmarshal(out, &sp) != nil {
		return
	}
	for _, d := range sp.Displays {
		e.GPUs = append(e.GPUs, SystemGPU{Model: d.Model, Cores: d.Cores, Vendor: d.Vendor, Metal: d.Metal})
	}
}
