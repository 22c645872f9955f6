package backend

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Errors of Open.
var (
	// ErrUnknown: no backend of that name is built in, or it does not offer
	// the requested precision.
	ErrUnknown = errclass.New(errclass.Usage, "backend: unknown backend")
	// ErrUnavailable: the backend is built in but cannot run here (no
	// device, a library missing); the error says which.
	ErrUnavailable = errclass.New(errclass.NoBackend, "backend unavailable")
)

// Precisions of matrix products (Config.Precision).
const (
	F32  = "f32"  // float32 products: every backend
	BF16 = "bf16" // bfloat16 activations on tensor cores, where a backend has them
)

// Config configures Open.
type Config struct {
	// Precision is the arithmetic of matrix products: F32 (the default and
	// the only one of the cpu backend) or BF16.
	Precision string
	// Workers is the number of host goroutines a host backend uses (0: all
	// cores); results never depend on it.
	Workers int
}

// Opener opens a registered backend. The returned backend owns its device:
// Close releases it.
type Opener func(Config) (Backend, error)

var (
	registryMu sync.Mutex
	registry   = map[string]Opener{}
)

// Register makes a backend available to Open under name. Backends register
// in their package's init: package cpu registers "cpu", package cuda "cuda", package metal "metal".
func Register(name string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[name] = open
}

// Names lists the registered backends, "cpu" first.
func Names() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	var names []string
	for n := range registry {
		if n != "cpu" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if _, ok := registry["cpu"]; ok {
		names = append([]string{"cpu"}, names...)
	}
	return names
}

// Open opens the named backend with c (Precision "" means F32).
func Open(name string, c Config) (Backend, error) {
	if c.Precision == "" {
		c.Precision = F32
	}
	if c.Precision != F32 && c.Precision != BF16 {
		return nil, fmt.Errorf("%w: precision %q (valid: f32, bf16)", ErrUnknown, c.Precision)
	}
	registryMu.Lock()
	open, ok := registry[name]
	registryMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (this build has: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return open(c)
}
