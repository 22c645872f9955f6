package metal

import (
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// The package registers itself as runtime backend "metal": a program that
// links it (cmd/dgq does) lists it among --backend's names. Registration
// loads nothing; the frameworks are opened when the backend is.
func init() { backend.Register("metal", openRegistered) }

// openRegistered opens backend "metal". The backend.Backend over the engine
// seam is not written yet, so it always fails, in one line, wrapping
// backend.ErrUnavailable (exit code 6 in cmd/dgq):
//
//   - off macOS on Apple silicon, or without a usable device, with
//     ErrUnavailable ("metal unavailable: needs macOS on Apple silicon");
//   - on a Mac whose device opens, with ErrNotImplemented, naming the device
//     it opened (and closed again).
func openRegistered(backend.Config) (backend.Backend, error) {
	e, err := OpenDevice(Options{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	name := e.Name()
	if err := e.Close(); err != nil {
		return nil, fmt.Errorf("%w: %w (closing the device %s: %w)", backend.ErrUnavailable, ErrNotImplemented, name, err)
	}
	return nil, fmt.Errorf("%w: %w (the device, %s, opens; docs/metal.md)", backend.ErrUnavailable, ErrNotImplemented, name)
}
