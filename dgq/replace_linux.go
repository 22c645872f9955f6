//go:build linux

package dgq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// replaceDir moves src to dst. When dst exists the two are swapped
// atomically (renameat2 RENAME_EXCHANGE) and the old content, now at src, is
// removed: at no moment is dst missing or half-written.
func replaceDir(src, dst string) error {
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("%w: %s appeared while writing; pass --force to replace it", ErrExists, dst)
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
				return fmt.Errorf("dgq: publish %s: %w", dst, err)
			}
			if err := os.Rename(src, dst); err != nil {
				return fmt.Errorf("dgq: publish %s: %w", dst, err)
			}
		}
		return nil
	}
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
		return replaceDirFallback(src, dst)
	}
	return os.RemoveAll(src)
}
