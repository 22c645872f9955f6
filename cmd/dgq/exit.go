package main

import (
	"context"
	"errors"
	"io/fs"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/check"
	"github.com/dgq-dev/dgq/runtime/generate"
	"github.com/dgq-dev/dgq/runtime/model"
	"github.com/dgq-dev/dgq/runtime/session"
	"github.com/dgq-dev/dgq/runtime/tokenizer"
)

// Exit codes (documented in docs/cli.md).
const (
	exitOK       = 0
	exitFailure  = 1 // anything not classified below
	exitUsage    = 2 // bad flags or arguments, output exists without --force
	exitInvalid  = 3 // invalid or corrupt input: source snapshot, config, pack; audit findings
	exitStale    = 4 // stale or incomplete Hugging Face cache: repo/revision not cached, pinned shard missing or changed
	exitIO       = 5 // I/O failure: unreadable/unwritable files, disk full
	exitBackend  = 6 // the compute backend cannot run here (no GPU, a library missing)
	exitCanceled = 130
)

// codedError carries an explicit exit code; silent ones have already been
// reported on stdout (e.g. an audit with findings).
type codedError struct {
	err    error
	code   int
	silent bool
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func usageErr(err error) error { return &codedError{err: err, code: exitUsage} }

var usageErrors = []error{
	dgq.ErrUsage, dgq.ErrExists, layout.ErrProfile, layout.ErrTarget, layout.ErrLocked,
	layout.ErrExpertFormats, layout.ErrOverrideSyntax, layout.ErrDuplicateSet, codecs.ErrUnknownFormat,
	backend.ErrUnknown,
}

var invalidErrors = []error{
	dgq.ErrSource, dgq.ErrManifest, dgq.ErrInvalid, dgq.ErrVersion, dgq.ErrLayered,
	hfcache.ErrSafetensors, hfcache.ErrIndex, hfcache.ErrInventory, hfcache.ErrMissingFile,
	layout.ErrConfig, layout.ErrInventory, layout.ErrDims, layout.ErrUnknownTensor, layout.ErrDuplicate,
	codecs.ErrNonFinite, tokenizer.ErrFormat, tokenizer.ErrUnsupported, tokenizer.ErrTooLarge,
	model.ErrBinding, model.ErrInput, check.ErrReference, generate.ErrConfig, session.ErrRun,
}

var staleErrors = []error{hfcache.ErrStale, hfcache.ErrNotInCache}

func exitCode(err error) int {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	if errors.Is(err, context.Canceled) {
		return exitCanceled
	}
	if errors.Is(err, backend.ErrUnavailable) {
		return exitBackend
	}
	for _, target := range staleErrors {
		if errors.Is(err, target) {
			return exitStale
		}
	}
	for _, target := range usageErrors {
		if errors.Is(err, target) {
			return exitUsage
		}
	}
	for _, target := range invalidErrors {
		if errors.Is(err, target) {
			return exitInvalid
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return exitIO
	}
	return exitFailure
}
