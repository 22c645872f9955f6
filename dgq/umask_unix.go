//go:build unix

package dgq

import "syscall"

// processUmask is the file mode creation mask, read once when the package is
// initialized (before any goroutine of the program creates files: setting and
// restoring it is the only portable way to read it).
var processUmask = func() uint32 {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return uint32(m)
}()
