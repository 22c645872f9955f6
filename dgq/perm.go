package dgq

import (
	"fmt"
	"io/fs"
	"os"
)

// Modes of what dgq publishes (a pack folder, a report, a card, a plot): the
// modes os.WriteFile and os.Mkdir would give, subject to the umask.
// os.MkdirTemp and os.CreateTemp, through which everything is staged, create
// 0700 and 0600 whatever the umask.
const (
	DirMode  fs.FileMode = 0o755
	FileMode fs.FileMode = 0o644
)

// PublicMode is mode less the process's umask: what os.Mkdir or
// os.OpenFile would have given a file created with mode.
func PublicMode(mode fs.FileMode) fs.FileMode {
	return mode &^ fs.FileMode(processUmask)
}

// ChmodPublic sets path's permissions to PublicMode(mode): a folder made
// with os.MkdirTemp or a file made with os.CreateTemp gets the mode it would
// have had if made plainly.
func ChmodPublic(path string, mode fs.FileMode) error {
	if err := os.Chmod(path, PublicMode(mode)); err != nil {
		return fmt.Errorf("dgq: %w", err)
	}
	return nil
}
