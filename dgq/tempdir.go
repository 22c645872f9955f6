package dgq

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MakeTempDir creates a new directory named prefix<pid>-<random> in parent
// (os.TempDir() when parent is empty) and returns its path; the caller
// removes it when done (defer). It first removes the directories of the
// same prefix that killed runs left in parent — those whose process no
// longer exists (removeStaleTemp, the rule of the staging directories) —
// so a run interrupted beyond any defer (SIGKILL, a power cut) is cleaned
// up by the next one.
func MakeTempDir(parent, prefix string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	removeStaleTemp(parent, prefix)
	dir, err := os.MkdirTemp(parent, prefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("dgq: create a temporary directory in %s: %w", parent, err)
	}
	return dir, nil
}

// removeStaleTemp deletes the directories prefix<pid>-… in parent whose
// process no longer exists. Those of live processes, concurrent runs
// included, are left alone; so is everything where liveness cannot be told
// (processAlive).
func removeStaleTemp(parent, prefix string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(parent, e.Name()))
	}
}

// FreeSpace returns the bytes an unprivileged user may still write on the
// file system of dir (or of its deepest existing ancestor); ok is false
// where it cannot be told (freeSpace).
func FreeSpace(dir string) (free int64, ok bool) { return freeSpace(dir) }
