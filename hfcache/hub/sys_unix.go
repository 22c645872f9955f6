//go:build unix

package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// freeSpace returns the bytes available to an unprivileged user on the
// file system of dir (or of its deepest existing ancestor); ok is false
// when it cannot be told.
func freeSpace(dir string) (free int64, ok bool) {
	for p := filepath.Clean(dir); ; {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			avail := uint64(st.Bavail) * uint64(st.Bsize)
			if avail > 1<<62 {
				avail = 1 << 62
			}
			return int64(avail), true
		}
		parent := filepath.Dir(p)
		if parent == p || !errors.Is(err, unix.ENOENT) {
			return 0, false
		}
		p = parent
	}
}

// diskErr wraps a write error that means the disk (or the quota) is full
// with ErrDiskFull; other errors are returned as they are.
func diskErr(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// lockPollInterval is how often a held lock is tried again.
const lockPollInterval = 100 * time.Millisecond

// lockFile takes an exclusive advisory lock (flock, as the filelock
// package huggingface_hub uses) on path, creating it, waiting while another
// process holds it, until ctx is done. Where the file system cannot lock
// (ENOLCK, ENOTSUP), it goes on without a lock, as huggingface_hub's
// WeakFileLock does. The returned function releases the lock.
func lockFile(ctx context.Context, path string) (func(), error) {
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("hub: lock: %w", diskErr(err))
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			t := time.NewTimer(lockPollInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				f.Close()
				return nil, ctx.Err()
			case <-t.C:
			}
		default:
			return func() { f.Close() }, nil
		}
	}
}
