package metal

import (
	"errors"
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// The package registers itself as runtime backend "metal": a program that
// links it (cmd/dgq does) lists it among --backend's names. Registration
// loads nothing; the frameworks are opened when the backend is.
func init() { backend.Register("metal", openRegistered) }

// openRegistered opens the system's default Metal device (openEngine:
// OpenDevice) and a backend on it (NewBackend) that owns the device. It
// fails in one line:
//
//   - off macOS on Apple silicon, or without a usable device, wrapping
//     backend.ErrUnavailable and ErrUnavailable ("backend unavailable: metal
//     unavailable: needs macOS on Apple silicon"; exit code 6 in cmd/dgq);
//   - for precision bf16, which no Metal kernel computes yet, wrapping
//     backend.ErrUnknown ("metal precision bf16 is not implemented"), after
//     the device opened (and closed again), so that a machine without Metal
//     says so first.
func openRegistered(c backend.Config) (backend.Backend, error) {
	o, oerr := optionsFor(c)
	e, err := openEngine()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	if oerr == nil {
		oerr = o.validate()
	}
	if oerr != nil {
		return nil, errors.Join(oerr, e.Close())
	}
	b, err := NewBackend(e, o)
	if err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return &ownedBackend{metalBackend: b.(*metalBackend), engine: e}, nil
}

// ownedBackend closes its engine with itself. It embeds the concrete
// backend, so that every optional interface the backend implements
// (backend.RouteRecorder, the diagnostics) is the owned backend's too.
var (
	_ backend.RouteRecorder    = (*ownedBackend)(nil)
	_ backend.DeviceDescriber  = (*ownedBackend)(nil)
	_ backend.KernelReporter   = (*ownedBackend)(nil)
	_ backend.ArithmeticProber = (*ownedBackend)(nil)
)

type ownedBackend struct {
	*metalBackend
	engine Engine
}

func (o *ownedBackend) Close() error { return errors.Join(o.metalBackend.Close(), o.engine.Close()) }
