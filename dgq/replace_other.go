//go:build !linux

package dgq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

func replaceDir(src, dst string) error {
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("dgq: publish %s: %w", dst, err)
		}
		return nil
	}
	return replaceDirFallback(src, dst)
}
