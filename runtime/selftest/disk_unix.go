//go:build linux || darwin || freebsd

package selftest

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// diskSpace is statfs(2) of path: the blocks available to an unprivileged
// user and the file system's blocks, in bytes.
func diskSpace(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}
