package cuda

import (
	"errors"
	"fmt"

	api "github.com/dgq-dev/dgq/runtime/backend"
)

// The package registers itself as runtime backend "cuda": a program that
// links it (cmd/dgq does) can run `--backend cuda`. Registration loads
// nothing; the libraries are opened when the backend is.
func init() { api.Register("cuda", openRegistered) }

// openRegistered opens device 0 and a backend on it that owns the device,
// with the Options of the config (optionsFor). Without a usable GPU the
// error wraps both api.ErrUnavailable and ErrUnavailable, in one
// line.
func openRegistered(c api.Config) (api.Backend, error) {
	o, err := optionsFor(c)
	if err != nil {
		return nil, err
	}
	d, err := Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	b, err := NewBackend(d, o)
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return &ownedBackend{backend: b.(*backend), device: d}, nil
}

// optionsFor maps a runtime backend config to Options: its precision ("" or
// "f32", "bf16"), every kernel at its default for that precision.
func optionsFor(c api.Config) (Options, error) {
	switch c.Precision {
	case "", "f32":
		return Options{Precision: PrecisionF32}, nil
	case "bf16":
		return Options{Precision: PrecisionBF16}, nil
	}
	return Options{}, fmt.Errorf("%w: cuda precision %q (valid: f32, bf16)", api.ErrUnknown, c.Precision)
}

// ownedBackend closes its device with itself. It embeds the concrete
// backend, so that every optional interface the backend implements
// (api.RouteRecorder, the diagnostics) is the owned backend's too.
type ownedBackend struct {
	*backend
	device *Device
}

func (o *ownedBackend) Close() error { return errors.Join(o.backend.Close(), o.device.Close()) }
