package runtime

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/dgq-dev/dgq/dgq/errclass"
)

// Errors of OpenBackend.
var (
	// ErrUnknownBackend: no backend of that name is built in.
	ErrUnknownBackend = errclass.New(errclass.Usage, "runtime: unknown backend")
	// ErrBackendUnavailable: the backend is built in but cannot run here
	// (no device, a library missing); the error says which.
	ErrBackendUnavailable = errclass.New(errclass.NoBackend, "backend unavailable")
)

// BackendConfig configures OpenBackend.
type BackendConfig struct {
	// Precision is the arithmetic of matrix products: "f32" (the default
	// and the only one of the cpu backend) or "bf16" (tensor-core
	// activations, where the backend has them).
	Precision string
}

// BackendOpener opens a registered backend. The returned backend owns its
// device: Close releases it.
type BackendOpener func(BackendConfig) (Backend, error)

var (
	backendsMu sync.Mutex
	backends   = map[string]BackendOpener{}
)

// RegisterBackend makes a backend available to OpenBackend under name
// (packages register theirs in init; "cpu" is built in).
func RegisterBackend(name string, open BackendOpener) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[name] = open
}

// BackendNames lists the backends OpenBackend knows, "cpu" first.
func BackendNames() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	names := []string{}
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return append([]string{"cpu"}, slices.DeleteFunc(names, func(s string) bool { return s == "cpu" })...)
}

// OpenBackend opens the named backend: "cpu" is CPUBackend; others must be
// registered (cmd/dgq links the cuda package, which registers "cuda").
func OpenBackend(name string, c BackendConfig) (Backend, error) {
	if c.Precision == "" {
		c.Precision = "f32"
	}
	if c.Precision != "f32" && c.Precision != "bf16" {
		return nil, fmt.Errorf("%w: precision %q (valid: f32, bf16)", ErrUnknownBackend, c.Precision)
	}
	if name == "cpu" {
		if c.Precision != "f32" {
			return nil, fmt.Errorf("%w: the cpu backend computes in f32 only (precision %s)", ErrUnknownBackend, c.Precision)
		}
		return CPUBackend(), nil
	}
	backendsMu.Lock()
	open, ok := backends[name]
	backendsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (this build has: %s)", ErrUnknownBackend, name, strings.Join(BackendNames(), ", "))
	}
	return open(c)
}
