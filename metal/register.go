package metal

import (
	"context"
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
	return &ownedBackend{Backend: b, e: e}, nil
}

// ownedBackend closes its engine with itself.
type ownedBackend struct {
	backend.Backend
	e Engine
}

func (o *ownedBackend) Close() error { return errors.Join(o.Backend.Close(), o.e.Close()) }

// RecordRoutes forwards to the backend's (backend.RouteRecorder):
// embedding the interface would hide it.
func (o *ownedBackend) RecordRoutes(r *backend.Routes) { o.Backend.(*metalBackend).RecordRoutes(r) }

// DeviceInfo, KernelReport and ProbeArithmetic forward to the backend's
// (runtime/backend's optional diagnostics), which embedding would hide.
func (o *ownedBackend) DeviceInfo() backend.DeviceInfo { return o.Backend.(*metalBackend).DeviceInfo() }

func (o *ownedBackend) KernelReport(ctx context.Context) (*backend.KernelReport, error) {
	return o.Backend.(*metalBackend).KernelReport(ctx)
}

func (o *ownedBackend) ProbeArithmetic() (*backend.Arithmetic, error) {
	return o.Backend.(*metalBackend).ProbeArithmetic()
}
