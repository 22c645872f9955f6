package codecs

import (
	"errors"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	ErrUnknownDType  = errors.New("codecs: unknown dtype")
	ErrUnknownFormat = errclass.New(errclass.Usage, "codecs: unknown format")
	// ErrDims: the tensor's shape does not fit the format (e.g. K not a multiple of the group).
	ErrDims = errors.New("codecs: shape not supported by format")
	// ErrShape: a shape is malformed (negative dimension, overflow, too many dimensions).
	ErrShape = errors.New("codecs: invalid shape")
	// ErrNonFinite: the source holds a NaN or an infinity.
	ErrNonFinite = errclass.New(errclass.Invalid, "codecs: non-finite source value")
	// ErrBuffer: a buffer handed to an encoder or decoder has the wrong length.
	ErrBuffer = errors.New("codecs: buffer length mismatch")
)

// ErrNeedScan: EncodeRows was called on an encoder that needs a tensor
// statistic (nvfp4's amax) before SetAmax.
var ErrNeedScan = errors.New("codecs: encoder needs SetAmax before EncodeRows")

// ErrUnknownMethod: an encoder method other than search and minmax.
var ErrUnknownMethod = errclass.New(errclass.Usage, "codecs: unknown encoder method")

// ErrRange: the source's values cannot be stored by the chosen encoder
// (the engine's min/max step of a group overflows float32).
var ErrRange = errors.New("codecs: value range not storable")
