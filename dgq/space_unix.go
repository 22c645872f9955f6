//go:build unix

package dgq

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// freeSpace is statfs(2)'s available blocks of dir, or of its deepest
// existing ancestor.
func freeSpace(dir string) (int64, bool) {
	for p := filepath.Clean(dir); ; {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return int64(min(uint64(st.Bavail)*uint64(st.Bsize), 1<<62)), true
		}
		parent := filepath.Dir(p)
		if parent == p || !errors.Is(err, unix.ENOENT) {
			return 0, false
		}
		p = parent
	}
}
