package metal

// The device engine's platform-independent part: its options and what it
// reports of the device. OpenDevice and DeviceEngine are in device_darwin.go
// (Metal through purego) and device_other.go (everywhere else: ErrUnavailable).

// Options configures OpenDevice.
type Options struct {
	// Source returns the Metal text of a translation unit, the unit of
	// Engine.Pipeline (a kernel file such as "rmsnorm.kern"), for the
	// compile plan the engine chose. Nil means the package's default:
	// UnitSourceFor, the units of runtime/kernels and metal/kernels (the
	// plan's header, the Metal prelude, the common include and the file).
	Source func(unit string, plan CompilePlan) (string, error)
}

// DeviceCaps is what the device engine read of its device when it opened it.
type DeviceCaps struct {
	// Name is the device's name ("Apple M2 Max").
	Name string
	// MaxBufferLength is the longest buffer the device makes, in bytes: the
	// bound on Alloc and on each Wrap.
	MaxBufferLength uint64
	// MaxThreadsPerThreadgroup is the device's bound per dimension (x, y, z)
	// of a threadgroup; each pipeline has its own bound on the product
	// (Pipeline.MaxThreads).
	MaxThreadsPerThreadgroup [3]int
	// RecommendedMaxWorkingSetSize is how many bytes the device can use
	// without hurting performance (Metal's estimate; on Apple silicon a
	// share of the unified memory).
	RecommendedMaxWorkingSetSize uint64
	// UnifiedMemory: CPU and GPU share memory (true on Apple silicon; the
	// engine requires it).
	UnifiedMemory bool
	// Apple7 and Metal3: the device supports the MTLGPUFamilyApple7 (M1 and
	// later) and MTLGPUFamilyMetal3 families (the engine requires both).
	Apple7, Metal3 bool
	// AppleFamily is the newest MTLGPUFamilyApple<N> the device supports
	// (7: M1, 8: M2, 9: M3 and M4, 10 and later as macOS knows them; 0 when
	// none).
	AppleFamily int
	// PageSize is the host's page, the alignment of Wrap (16 KiB on Apple
	// silicon).
	PageSize int
}

// The real engine implements the seam on every platform (off darwin every
// method fails with ErrUnavailable).
var _ Engine = (*DeviceEngine)(nil)

// defaultSource is the Source of an engine opened with a nil
// Options.Source: UnitSourceFor, the Metal translation unit of a kernel file
// of runtime/kernels or metal/kernels.
func defaultSource(unit string, plan CompilePlan) (string, error) { return UnitSourceFor(unit, plan) }
