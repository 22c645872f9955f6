//go:build unix

package dgq

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processAlive reports whether a process with this pid exists (EPERM means it
// exists but belongs to someone else).
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
