package session

import "golang.org/x/sys/unix"

// HostMemory is the physical memory (sysctl hw.memsize), as dgq selftest's
// environment reads it; macOS says nothing like Linux's MemAvailable.
func HostMemory() (total, available uint64) {
	if m, err := unix.SysctlUint64("hw.memsize"); err == nil {
		return m, 0
	}
	return 0, 0
}
