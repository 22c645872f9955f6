//go:build !linux

package metal

import "fmt"

// HostEngine is the host engine; off Linux NewHostEngine never returns one
// (the embedded Engine only gives the type the interface's methods).
type HostEngine struct{ Engine }

// NewHostEngine returns an error wrapping ErrHostUnavailable: the host
// engine runs on Linux (host_engine.go).
func NewHostEngine(HostOptions) (*HostEngine, error) {
	return nil, fmt.Errorf("%w: it runs on Linux", ErrHostUnavailable)
}
