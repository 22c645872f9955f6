package dgq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/internal/errclass"
)

// ErrNotAPack: a Hugging Face repo named as a pack holds no pack manifest
// (it is a model checkpoint, or not a dgq pack at all).
var ErrNotAPack = errclass.Wrap(errclass.Invalid, "dgq: not a .dgq pack", ErrManifest)

// ResolvePack turns what a user passes as PACK into the pack's folder. A
// path that exists is used as it is (a local folder always wins, as with
// quantize -m). Anything else that parses as ORG/NAME[@REV] is looked up in
// the Hugging Face hub cache (hfcache.ResolveSource: the snapshot of a pack
// repository fetched with dgq download or hf download), and its snapshot
// folder must hold a pack manifest. Any other string is returned unchanged,
// for the reader to report as missing.
//
// Errors wrap hfcache.ErrNotInCache (the repo or revision is not cached;
// the message ends with the download command) or ErrNotAPack.
func ResolvePack(arg string) (string, error) {
	if arg == "" {
		return "", fmt.Errorf("%w: no pack given", ErrUsage)
	}
	if _, err := os.Lstat(arg); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return arg, nil
	}
	if _, ok := hfcache.ParseRepoRef(arg); !ok {
		return arg, nil
	}
	res, err := hfcache.ResolveSource(arg)
	if err != nil {
		return "", fmt.Errorf("pack %s: %w", arg, err)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, ManifestName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %s (cached snapshot %s) holds no %s; a model checkpoint is made into a pack with dgq quantize -m %s",
				ErrNotAPack, arg, res.Dir, ManifestName, arg)
		}
		return "", fmt.Errorf("dgq: pack %s: %w", arg, err)
	}
	return res.Dir, nil
}
