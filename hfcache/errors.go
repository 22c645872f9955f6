package hfcache

import (
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrSafetensors: a safetensors file is malformed. The more specific
	// sentinels below wrap it.
	ErrSafetensors = errclass.New(errclass.Invalid, "hfcache: invalid safetensors file")
	// ErrHeaderTooLarge: the header length exceeds MaxHeaderBytes or the file.
	ErrHeaderTooLarge = fmt.Errorf("%w: header too large", ErrSafetensors)
	// ErrDuplicateTensor: a tensor name appears twice in one header.
	ErrDuplicateTensor = fmt.Errorf("%w: duplicate tensor", ErrSafetensors)
	// ErrUnsupportedDType: a tensor has a dtype other than BF16, F16 or F32.
	ErrUnsupportedDType = fmt.Errorf("%w: unsupported dtype", ErrSafetensors)
	// ErrIndex: model.safetensors.index.json is malformed.
	ErrIndex = errclass.New(errclass.Invalid, "hfcache: invalid safetensors index")
	// ErrMissingFile: a file the snapshot needs does not exist.
	ErrMissingFile = errclass.New(errclass.Invalid, "hfcache: missing file")
	// ErrInventory: the index and the shards disagree about which tensors
	// exist and where.
	ErrInventory = errclass.New(errclass.Invalid, "hfcache: index and shards disagree")
	// ErrFileTooLarge: a side file is larger than the cap its reader set.
	ErrFileTooLarge = errors.New("hfcache: file too large")
)

// fail builds an error wrapping kind: "<kind>: <where>: <detail>". where
// names the file (it may be empty); detail must be one line (user-controlled
// strings in it are quoted with %q).
func fail(kind error, where, format string, args ...any) error {
	detail := fmt.Sprintf(format, args...)
	if where != "" {
		return fmt.Errorf("%w: %s: %s", kind, where, detail)
	}
	return fmt.Errorf("%w: %s", kind, detail)
}

// Sentinels of hub cache resolution (resolve.go, hint.go).
var (
	// ErrNotInCache: a repo, revision or snapshot folder is not in the hub
	// cache. The message ends with the fix, "dgq download ORG/NAME
	// --revision REV".
	ErrNotInCache = errclass.New(errclass.Stale, "hfcache: not in the hub cache")
	// ErrRepoRef: a repo id or revision is malformed (it cannot be looked
	// up, nor downloaded).
	ErrRepoRef = errors.New("hfcache: invalid repo id or revision")
	// ErrStale: a pinned external file is missing or changed (StaleError
	// unwraps to it).
	ErrStale = errclass.New(errclass.Stale, "hfcache: stale external file")
)
