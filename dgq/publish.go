package dgq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CheckOutput refuses an output path that exists unless force is set, and
// with force refuses anything but an existing pack or an empty directory, so
// a typo can never delete unrelated data.
func CheckOutput(out string, force bool) error {
	if out == "" {
		return fmt.Errorf("%w: no output directory given (-o)", ErrUsage)
	}
	st, err := os.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dgq: output %s: %w", out, err)
	}
	if !force {
		return fmt.Errorf("%w: %s already exists; pass --force to replace it", ErrExists, out)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s exists and is not a directory; refusing to replace it even with --force", ErrExists, out)
	}
	if _, err := os.Stat(filepath.Join(out, ManifestName)); err == nil {
		return nil
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("dgq: output %s: %w", out, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s is a non-empty directory that is not a dgq pack; refusing to replace it even with --force", ErrExists, out)
	}
	return nil
}

// Staging is a temporary directory beside the output. Everything is written
// there, synced, and the directory is renamed into place last (Publish), so
// an interrupted run leaves no directory at the output path.
type Staging struct {
	out, tmp string
	force    bool
	removed  []string // stale staging directories removed on the way (RemovedStale)
}

// NewStaging creates the staging directory for out in out's parent.
func NewStaging(out string, force bool) (*Staging, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, fmt.Errorf("dgq: output %s: %w", out, err)
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("dgq: create %s: %w", parent, err)
	}
	prefix := stagingPrefix(abs)
	removed := removeStaleStaging(parent)
	tmp, err := os.MkdirTemp(parent, prefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("dgq: create staging directory in %s: %w", parent, err)
	}
	// The staging directory becomes the pack: 0755 less the umask, not
	// MkdirTemp's 0700.
	if err := ChmodPublic(tmp, DirMode); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return &Staging{out: abs, tmp: tmp, force: force, removed: removed}, nil
}

// RemovedStale lists the staging directories of killed runs that
// NewStaging removed from the output's parent folder (full paths), so the
// caller can say where the space came back from.
func (s *Staging) RemovedStale() []string { return s.removed }

// stagingMarker is what every staging directory's name holds:
// ".NAME.dgq-tmp-PID-…".
const stagingMarker = ".dgq-tmp-"

// stagingPrefix names the staging directories of out: ".NAME.dgq-tmp-PID-…".
func stagingPrefix(out string) string { return "." + filepath.Base(out) + stagingMarker }

// removeStaleStaging deletes the staging directories in parent left by runs
// that were killed (their process no longer exists), whatever output they
// were for, and returns their paths. Directories of live processes,
// including concurrent runs, are left alone.
func removeStaleStaging(parent string) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		i := strings.LastIndex(name, stagingMarker)
		if !e.IsDir() || !strings.HasPrefix(name, ".") || i < 1 {
			continue
		}
		pidText, _, ok := strings.Cut(name[i+len(stagingMarker):], "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		dir := filepath.Join(parent, name)
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// Path is the path of a file inside the staging directory.
func (s *Staging) Path(name string) string { return filepath.Join(s.tmp, name) }

// WriteFile writes and syncs one file of the staging directory.
func (s *Staging) WriteFile(name string, data []byte) error {
	f, err := os.OpenFile(s.Path(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("dgq: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("dgq: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("dgq: sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("dgq: close %s: %w", name, err)
	}
	return nil
}

// Publish renames the staging directory to the output. An existing output is
// re-checked (it may have appeared meanwhile) and replaced only with force;
// the files in it that are not pack files (a README.md above all) are
// carried into the new pack first (keepUserFiles).
func (s *Staging) Publish() error {
	if err := CheckOutput(s.out, s.force); err != nil {
		return err
	}
	if _, err := keepUserFiles(s.out, s.tmp); err != nil {
		return err
	}
	if err := syncDir(s.tmp); err != nil {
		return err
	}
	if err := replaceDir(s.tmp, s.out); err != nil {
		return err
	}
	return syncDir(filepath.Dir(s.out))
}

// Abort removes the staging directory.
func (s *Staging) Abort() { _ = os.RemoveAll(s.tmp) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("dgq: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("dgq: sync %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic writes path through a synced temporary file in the same
// directory and a rename.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("dgq: %w", err)
	}
	tmp := f.Name()
	// 0644 less the umask, as os.WriteFile would give, not CreateTemp's 0600.
	werr := f.Chmod(PublicMode(FileMode))
	if werr == nil {
		_, werr = f.Write(data)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("dgq: write %s: %w", path, werr)
	}
	return syncDir(dir)
}

// CopyPackFiles copies a pack's side files into the staging directory,
// refusing any whose size or digest differs from the manifest.
func CopyPackFiles(st *Staging, srcDir string, files []File) error {
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(srcDir, filepath.Base(f.Name)))
		if err != nil {
			return fmt.Errorf("dgq: side file: %w", err)
		}
		if int64(len(data)) != f.Size || digestBytes(data) != f.Digest {
			return fmt.Errorf("%w: side file %s of %s does not match its digest", ErrInvalid, f.Name, srcDir)
		}
		if err := st.WriteFile(f.Name, data); err != nil {
			return err
		}
	}
	return nil
}
