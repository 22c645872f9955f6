package main

import (
	"errors"

	"github.com/dgq-dev/dgq/internal/errclass"
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
	// exitCanceled is an interruption by SIGINT or a canceled context;
	// exitTerminated one by SIGTERM (128 + the signal's number, as a shell
	// reports a process the signal ended).
	exitTerminated = 143
)

// classCodes is the exit code of each error class.
var classCodes = map[errclass.Class]int{
	errclass.Unclassified: exitFailure,
	errclass.Usage:        exitUsage,
	errclass.Invalid:      exitInvalid,
	errclass.Stale:        exitStale,
	errclass.IO:           exitIO,
	errclass.NoBackend:    exitBackend,
	errclass.Interrupted:  exitCanceled,
}

// exitKinds name the exit codes in JSON errors.
var exitKinds = map[int]string{
	exitFailure: "failure", exitUsage: "usage", exitInvalid: "invalid_input",
	exitStale: "stale_cache", exitIO: "io", exitCanceled: "canceled", exitTerminated: "canceled", exitBackend: "backend_unavailable",
}

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

// exitCode is the code of an explicit codedError in err's tree, else the
// code of err's class.
func exitCode(err error) int {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return classCodes[errclass.Of(err)]
}
