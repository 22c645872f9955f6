package dgq

import "github.com/dgq-dev/dgq/internal/errclass"

// Sentinel errors; test with errors.Is.
var (
	// ErrExists: the output path exists and --force was not given.
	ErrExists = errclass.New(errclass.Usage, "dgq: output exists")
	// ErrManifest: the manifest is missing, unreadable or not a dgq manifest.
	ErrManifest = errclass.New(errclass.Invalid, "dgq: invalid manifest")
	// ErrLegacyFormat: the manifest is one of dgq's earlier planar format.
	ErrLegacyFormat = errclass.New(errclass.Invalid, "dgq: unsupported earlier dgq pack format")
	// ErrVersion: the manifest's format version is not one this build knows.
	ErrVersion = errclass.New(errclass.Invalid, "dgq: unsupported format version")
	// ErrInvalid: the pack breaks a rule of the format (see Finding).
	ErrInvalid = errclass.New(errclass.Invalid, "dgq: invalid pack")
	// ErrLayered: the pack is layered and needs the overlay loader.
	ErrLayered = errclass.New(errclass.Invalid, "dgq: layered pack")
	// ErrSource: the source snapshot is unusable (bad config, missing tensors, non-finite values).
	ErrSource = errclass.New(errclass.Invalid, "dgq: invalid source")
	// ErrUsage: the options given to a library call are inconsistent.
	ErrUsage = errclass.New(errclass.Usage, "dgq: invalid options")
)
