package dgq

import (
	"fmt"
	"os"
)

// replaceDirFallback replaces dst with src through two renames: dst moves
// aside first, so a crash between them leaves the old pack beside the path
// (never a mixture), and it is removed only after src is in place.
func replaceDirFallback(src, dst string) error {
	old := src + ".old"
	if err := os.Rename(dst, old); err != nil {
		return fmt.Errorf("dgq: move old %s aside: %w", dst, err)
	}
	if err := os.Rename(src, dst); err != nil {
		_ = os.Rename(old, dst)
		return fmt.Errorf("dgq: publish %s: %w", dst, err)
	}
	return os.RemoveAll(old)
}
