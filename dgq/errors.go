package dgq

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrExists: the output path exists and --force was not given.
	ErrExists = errors.New("dgq: output exists")
	// ErrManifest: the manifest is missing, unreadable or not a dgq manifest.
	ErrManifest = errors.New("dgq: invalid manifest")
	// ErrLegacyFormat: the manifest is one of dgq's earlier planar format.
	ErrLegacyFormat = errors.New("dgq: unsupported earlier dgq pack format")
	// ErrVersion: the manifest's format version is not one this build knows.
	ErrVersion = errors.New("dgq: unsupported format version")
	// ErrInvalid: the pack breaks a rule of the format (see Finding).
	ErrInvalid = errors.New("dgq: invalid pack")
	// ErrLayered: the pack is layered and needs the overlay loader.
	ErrLayered = errors.New("dgq: layered pack")
	// ErrSource: the source snapshot is unusable (bad config, missing tensors, non-finite values).
	ErrSource = errors.New("dgq: invalid source")
	// ErrUsage: the options given to a library call are inconsistent.
	ErrUsage = errors.New("dgq: invalid options")
)
