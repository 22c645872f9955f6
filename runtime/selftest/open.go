package selftest

import (
	"context"
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// openBackend opens backend name with c (backend.Open) and describes it:
// Available, the device (backend.DeviceDescriber), the kernels and the
// numerics of its Caps; or, when it cannot be opened, Reason (the one-line
// error) and Open's error, which wraps backend.ErrUnavailable or
// backend.ErrUnknown. It waits for the open until ctx ends at most: then it
// returns ctx's error (Reason says so) and the open, which cannot be
// stopped, goes on in the background and closes what it opens. The caller
// closes the backend returned.
func openBackend(ctx context.Context, name string, c backend.Config) (backend.Backend, BackendInfo, error) {
	return openWith(ctx, name, c, backend.Open)
}

// openWith is openBackend with open in place of backend.Open.
func openWith(ctx context.Context, name string, c backend.Config, open func(string, backend.Config) (backend.Backend, error)) (backend.Backend, BackendInfo, error) {
	if c.Precision == "" {
		c.Precision = backend.F32
	}
	info := BackendInfo{Name: name, Precision: c.Precision}
	if err := ctx.Err(); err != nil {
		info.Reason = "not opened: " + err.Error()
		return nil, info, err
	}
	type opened struct {
		b   backend.Backend
		err error
	}
	done := make(chan opened, 1)
	go func() {
		b, err := open(name, c)
		done <- opened{b, err}
	}()
	var o opened
	select {
	case o = <-done:
	case <-ctx.Done():
		go func() {
			if late := <-done; late.b != nil {
				late.b.Close()
			}
		}()
		info.Reason = fmt.Sprintf("did not open: %v", context.Cause(ctx))
		return nil, info, ctx.Err()
	}
	if o.err == nil && o.b == nil {
		o.err = fmt.Errorf("%w: %s: its opener returned no backend", backend.ErrUnavailable, name)
	}
	if o.err != nil {
		info.Reason = oneLine(o.err.Error())
		return nil, info, o.err
	}
	info.Available = true
	caps := o.b.Caps()
	info.Kernels, info.Numerics = caps.Kernels, &caps.Numerics
	if d, ok := o.b.(backend.DeviceDescriber); ok {
		dev := d.DeviceInfo()
		info.Device = &dev
	}
	return o.b, info, nil
}
