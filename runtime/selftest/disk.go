package selftest

import (
	"os"
	"path/filepath"
)

// DiskInfo is the free space of the file system that holds a path.
type DiskInfo struct {
	// Path is the path asked about (made absolute where it could be).
	Path string `json:"path"`
	// MeasuredAt is what was measured: Path, or its deepest existing
	// ancestor when Path does not exist yet ("" when nothing was).
	MeasuredAt string `json:"measured_at,omitempty"`
	// FreeBytes is the space an unprivileged user may still write and
	// TotalBytes the file system's size; 0 when not measured (Error says
	// why).
	FreeBytes  uint64 `json:"free_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	Error      string `json:"error,omitempty"`
}

// measureDisk measures the file system of path, or of its deepest existing
// ancestor (statfs where the system has it: diskSpace).
func measureDisk(path string) DiskInfo {
	d := DiskInfo{Path: path}
	if path == "" {
		d.Error = "no path"
		return d
	}
	if abs, err := filepath.Abs(path); err == nil {
		d.Path = abs
	}
	at := d.Path
	for {
		if _, err := os.Stat(at); err == nil {
			break
		}
		parent := filepath.Dir(at)
		if parent == at {
			d.Error = "neither the path nor any ancestor exists"
			return d
		}
		at = parent
	}
	d.MeasuredAt = at
	free, total, err := diskSpace(at)
	if err != nil {
		d.Error = oneLine(err.Error())
		return d
	}
	d.FreeBytes, d.TotalBytes = free, total
	return d
}
