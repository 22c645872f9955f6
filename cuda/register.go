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

// openRegistered opens device 0 and a backend on it that owns the device.
// Without a usable GPU the error wraps both api.ErrUnavailable
// and ErrUnavailable, in one line.
func openRegistered(c api.Config) (api.Backend, error) {
	o := BackendOptions{}
	switch c.Precision {
	case "", "f32":
	case "bf16":
		o.Precision = PrecisionBF16
	default:
		return nil, fmt.Errorf("%w: cuda precision %q (valid: f32, bf16)", api.ErrUnknown, c.Precision)
	}
	d, err := Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	return &ownedBackend{Backend: NewBackend(d, o), d: d}, nil
}

// ownedBackend closes its device with itself.
type ownedBackend struct {
	api.Backend
	d *Device
}

func (o *ownedBackend) Close() error { return errors.Join(o.Backend.Close(), o.d.Close()) }
