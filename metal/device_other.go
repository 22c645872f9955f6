//go:build !darwin

package metal

import (
	"fmt"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// errNotDarwin is the error of every entry point off macOS.
var errNotDarwin = fmt.Errorf("%w: needs macOS on Apple silicon", ErrUnavailable)

// DeviceEngine is the Engine over a Metal device. Off macOS there is none:
// OpenDevice fails and every method returns ErrUnavailable.
type DeviceEngine struct{}

// OpenDevice opens the system's default Metal device. Off macOS it returns
// an error wrapping ErrUnavailable: "metal unavailable: needs macOS on Apple
// silicon".
func OpenDevice(Options) (*DeviceEngine, error) { return nil, errNotDarwin }

// Name is "metal (unavailable)".
func (*DeviceEngine) Name() string { return "metal (unavailable)" }

// Caps is empty.
func (*DeviceEngine) Caps() DeviceCaps { return DeviceCaps{} }

// Alloc fails with ErrUnavailable.
func (*DeviceEngine) Alloc(int) (Mem, error) { return nil, errNotDarwin }

// Wrap fails with ErrUnavailable.
func (*DeviceEngine) Wrap([]byte) (Mem, error) { return nil, errNotDarwin }

// Pipeline fails with ErrUnavailable.
func (*DeviceEngine) Pipeline(string, string) (Pipeline, error) { return nil, errNotDarwin }

// Dispatch fails with ErrUnavailable.
func (*DeviceEngine) Dispatch(Pipeline, [3]int, [3]int, ...Arg) error { return errNotDarwin }

// Sync fails with ErrUnavailable.
func (*DeviceEngine) Sync() error { return errNotDarwin }

// Close does nothing.
func (*DeviceEngine) Close() error { return nil }

// Plan is the zero CompilePlan.
func (*DeviceEngine) Plan() CompilePlan { return CompilePlan{} }

// CompileLog is "".
func (*DeviceEngine) CompileLog(string) string { return "" }

// Numerics is AppleGPU, what the engine would report on a Mac.
func (*DeviceEngine) Numerics() backend.Numerics { return AppleGPU }
