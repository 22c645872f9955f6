package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/hfcache/hub"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/metal"
	"github.com/dgq-dev/dgq/overlay"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/session"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// TestExitCodes pins the exit code of every sentinel of the library and of
// the error trees the commands return (docs/cli.md, "Exit codes").
func TestExitCodes(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"codecs.ErrUnknownFormat", codecs.ErrUnknownFormat, exitUsage},
		{"codecs.ErrNonFinite", codecs.ErrNonFinite, exitInvalid},
		{"codecs.ErrUnknownDType", codecs.ErrUnknownDType, exitFailure},
		{"codecs.ErrDims", codecs.ErrDims, exitFailure},
		{"codecs.ErrShape", codecs.ErrShape, exitFailure},
		{"codecs.ErrBuffer", codecs.ErrBuffer, exitFailure},
		{"codecs.ErrNeedScan", codecs.ErrNeedScan, exitFailure},
		{"codecs.ErrUnknownMethod", codecs.ErrUnknownMethod, exitUsage},
		{"codecs.ErrRange", codecs.ErrRange, exitFailure},

		{"layout.ErrUnknownTensor", layout.ErrUnknownTensor, exitInvalid},
		{"layout.ErrLocked", layout.ErrLocked, exitUsage},
		{"layout.ErrTarget", layout.ErrTarget, exitUsage},
		{"layout.ErrOverrideSyntax", layout.ErrOverrideSyntax, exitUsage},
		{"layout.ErrProfile", layout.ErrProfile, exitUsage},
		{"layout.ErrDims", layout.ErrDims, exitInvalid},
		{"layout.ErrDuplicate", layout.ErrDuplicate, exitInvalid},
		{"layout.ErrDuplicateSet", layout.ErrDuplicateSet, exitUsage},
		{"layout.ErrConfig", layout.ErrConfig, exitInvalid},
		{"layout.ErrInventory", layout.ErrInventory, exitInvalid},
		{"layout.InventoryError", &layout.InventoryError{Missing: []string{"a"}}, exitInvalid},
		{"layout.TensorError", &layout.TensorError{Name: "a", Err: layout.ErrDims}, exitInvalid},

		{"hfcache.ErrSafetensors", hfcache.ErrSafetensors, exitInvalid},
		{"hfcache.ErrHeaderTooLarge", hfcache.ErrHeaderTooLarge, exitInvalid},
		{"hfcache.ErrDuplicateTensor", hfcache.ErrDuplicateTensor, exitInvalid},
		{"hfcache.ErrUnsupportedDType", hfcache.ErrUnsupportedDType, exitInvalid},
		{"hfcache.ErrIndex", hfcache.ErrIndex, exitInvalid},
		{"hfcache.ErrMissingFile", hfcache.ErrMissingFile, exitInvalid},
		{"hfcache.ErrInventory", hfcache.ErrInventory, exitInvalid},
		{"hfcache.ErrFileTooLarge", hfcache.ErrFileTooLarge, exitFailure},
		{"hfcache.ErrNotInCache", hfcache.ErrNotInCache, exitStale},
		{"hfcache.ErrRepoRef", hfcache.ErrRepoRef, exitFailure},
		{"hfcache.ErrStale", hfcache.ErrStale, exitStale},

		{"hub.ErrOptions", hub.ErrOptions, exitUsage},
		{"hub.ErrRepoNotFound", hub.ErrRepoNotFound, exitUsage},
		{"hub.ErrRevisionNotFound", hub.ErrRevisionNotFound, exitUsage},
		{"hub.ErrEntryNotFound", hub.ErrEntryNotFound, exitUsage},
		{"hub.ErrGated", hub.ErrGated, exitUsage},
		{"hub.ErrAuth", hub.ErrAuth, exitUsage},
		{"hub.ErrNetwork", hub.ErrNetwork, exitIO},
		{"hub.ErrHTTP", hub.ErrHTTP, exitIO},
		{"hub.ErrDiskFull", hub.ErrDiskFull, exitIO},
		{"hub.ErrCorrupt", hub.ErrCorrupt, exitInvalid},
		{"hub.ErrProtocol", hub.ErrProtocol, exitInvalid},
		{"hub.ErrOffline", hub.ErrOffline, exitStale},

		{"dgq.ErrExists", dgq.ErrExists, exitUsage},
		{"dgq.ErrManifest", dgq.ErrManifest, exitInvalid},
		{"dgq.ErrLegacyFormat", dgq.ErrLegacyFormat, exitInvalid},
		{"dgq.ErrVersion", dgq.ErrVersion, exitInvalid},
		{"dgq.ErrInvalid", dgq.ErrInvalid, exitInvalid},
		{"dgq.ErrLayered", dgq.ErrLayered, exitInvalid},
		{"dgq.ErrSource", dgq.ErrSource, exitInvalid},
		{"dgq.ErrUsage", dgq.ErrUsage, exitUsage},

		{"overlay.ErrRepack", overlay.ErrRepack, exitFailure},
		{"overlay.ErrBase", overlay.ErrBase, exitUsage},

		{"model.ErrBinding", model.ErrBinding, exitInvalid},
		{"model.BindError", &model.BindError{Missing: []string{"a"}}, exitInvalid},
		{"model.ErrInput", model.ErrInput, exitInvalid},
		{"model.ErrCache", model.ErrCache, exitFailure},
		{"check.ErrReference", check.ErrReference, exitInvalid},
		{"check.ErrNoSpace", check.ErrNoSpace, exitIO},
		{"backend.ErrUnknown", backend.ErrUnknown, exitUsage},
		{"backend.ErrUnavailable", backend.ErrUnavailable, exitBackend},
		{"metal.ErrUnavailable", metal.ErrUnavailable, exitBackend},
		{"metal.ErrBufferLimit", metal.ErrBufferLimit, exitBackend},
		{"metal.ErrUnaligned", metal.ErrUnaligned, exitFailure},
		{"metal.ErrNoSource", metal.ErrNoSource, exitFailure},
		{"metal.ErrCompile", metal.ErrCompile, exitFailure},
		{"metal.ErrNoKernel", metal.ErrNoKernel, exitFailure},
		{"metal.ErrArgument", metal.ErrArgument, exitFailure},
		{"metal.ErrAlloc", metal.ErrAlloc, exitFailure},
		{"metal.ErrCommand", metal.ErrCommand, exitFailure},
		{"metal.ErrClosed", metal.ErrClosed, exitFailure},
		{"metal.ErrHostUnavailable", metal.ErrHostUnavailable, exitFailure},
		{"metal.ErrGeometry", metal.ErrGeometry, exitFailure},
		{"metal.ErrForeign", metal.ErrForeign, exitFailure},
		{"metal.ErrReadOnly", metal.ErrReadOnly, exitFailure},
		{"metal.ErrDivergentBarrier", metal.ErrDivergentBarrier, exitFailure},
		{"metal.ErrSanitizer", metal.ErrSanitizer, exitFailure},
		{"generate.ErrConfig", generate.ErrConfig, exitInvalid},
		{"session.ErrRun", session.ErrRun, exitInvalid},
		{"session.ErrNotUTF8", session.ErrNotUTF8, exitUsage},

		{"tokenizer.ErrFormat", tokenizer.ErrFormat, exitInvalid},
		{"tokenizer.ErrUnsupported", tokenizer.ErrUnsupported, exitInvalid},
		{"tokenizer.ErrTooLarge", tokenizer.ErrTooLarge, exitInvalid},
		{"tokenizer.ErrMissing", tokenizer.ErrMissing, exitInvalid},

		{"plain error", errors.New("boom"), exitFailure},
		{"context.Canceled", context.Canceled, exitCanceled},
		{"context.DeadlineExceeded", context.DeadlineExceeded, exitFailure},
		{"PathError", pathErr, exitIO},
		{"wrapped PathError", fmt.Errorf("dgq: reading: %w", pathErr), exitIO},

		// Precedence: coded, canceled, backend, stale, usage, invalid, I/O.
		{"coded beats everything", fmt.Errorf("x: %w", &codedError{err: context.Canceled, code: exitFailure}), exitFailure},
		{"canceled beats invalid", fmt.Errorf("%w: %w", session.ErrRun, context.Canceled), exitCanceled},
		{"backend beats invalid", fmt.Errorf("%w: %w", session.ErrRun, fmt.Errorf("%w: cuda unavailable: no device", backend.ErrUnavailable)), exitBackend},
		{"canceled beats backend", errors.Join(backend.ErrUnavailable, context.Canceled), exitCanceled},
		{"stale beats usage", errors.Join(dgq.ErrUsage, hfcache.ErrStale), exitStale},
		{"stale beats invalid", fmt.Errorf("%w: %w", dgq.ErrSource, hfcache.ErrNotInCache), exitStale},
		{"usage beats invalid", fmt.Errorf("%w: %w", dgq.ErrSource, layout.ErrProfile), exitUsage},
		{"invalid beats I/O", fmt.Errorf("%w: %w", dgq.ErrManifest, pathErr), exitInvalid},
		{"I/O beats unclassified", fmt.Errorf("%w: %w", overlay.ErrRepack, pathErr), exitIO},
		{"joined tree", errors.Join(errors.New("a"), fmt.Errorf("b: %w", errors.Join(pathErr, tokenizer.ErrFormat))), exitInvalid},
		{"deep join", errors.Join(errors.New("a"), errors.Join(errors.New("b"), fmt.Errorf("c: %w", hfcache.ErrStale))), exitStale},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := exitCode(c.err); got != c.want {
				t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
			}
		})
	}
}
