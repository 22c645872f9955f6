package metal

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Launches of the backend: kernels looked up once per backend, arguments,
// and the launch geometries the kernels are written for.

// Threadgroup sizes the kernels are written for.
const (
	strideThreads = 256  // 1-D grid-stride kernels (elementwise, dequant, re-lay, embed, copies)
	strideGroups  = 1024 // the most groups of a grid-stride launch: the kernels stride over the rest
	rowThreads    = 256  // one group per row (rmsnorm, row statistics, softmax, router)
	wideRowThread = 1024 // one group per row of 8192 values or more
	wideRow       = 8192
	gemmThreads   = 128 // gemm.metal's GM_THREADS
	gemmTile      = 32  // gemm.metal's GM_BM = GM_BN
)

// pipeline returns kernel of unit, looked up on the engine once.
func (b *metalBackend) pipeline(unit, kernel string) (Pipeline, error) {
	k := pipeKey{unit, kernel}
	if p, ok := b.pipes[k]; ok {
		return p, nil
	}
	p, err := b.e.Pipeline(unit, kernel)
	if err != nil {
		return nil, fmt.Errorf("metal: kernel %s of %s: %w", kernel, unit, err)
	}
	b.pipes[k] = p
	return p, nil
}

// launch queues kernel of unit on groups groups of threads threads (1-D
// when the y and z counts are left 0).
func (b *metalBackend) launch(unit, kernel string, groups, threads [3]int, args ...Arg) error {
	p, err := b.pipeline(unit, kernel)
	if err != nil {
		return err
	}
	for d := range 3 {
		groups[d], threads[d] = max(groups[d], 1), max(threads[d], 1)
	}
	if n := threads[0] * threads[1] * threads[2]; n > p.MaxThreads() {
		return fmt.Errorf("%w: metal: %s needs %d threads a group, the pipeline allows %d", ErrGeometry, kernel, n, p.MaxThreads())
	}
	if err := b.e.Dispatch(p, groups, threads, args...); err != nil {
		return fmt.Errorf("metal: %s: %w", kernel, err)
	}
	return nil
}

// stride queues a 1-D grid-stride kernel over n items (nothing for n = 0).
func (b *metalBackend) stride(unit, kernel string, n int64, args ...Arg) error {
	if n <= 0 {
		return nil
	}
	g := min((n+strideThreads-1)/strideThreads, strideGroups)
	return b.launch(unit, kernel, [3]int{int(g)}, [3]int{strideThreads}, args...)
}

// fitThreads is the group size for n items a group, at most limit: whole
// SIMD groups, no more than the items need (a group of 256 threads over a
// row of 32 values idles 224 of them, on a GPU as on the host engine).
func fitThreads(n, limit int) int { return min(limit, max(32, (n+31)/32*32)) }

// perRow queues a kernel with groups groups, one per row of n values: 1024
// threads a group for rows of wideRow values or more (as the pipeline
// allows, in whole SIMD groups), else up to rowThreads as the row needs.
func (b *metalBackend) perRow(unit, kernel string, groups, n int, args ...Arg) error {
	threads := fitThreads(n, rowThreads)
	if n >= wideRow {
		p, err := b.pipeline(unit, kernel)
		if err != nil {
			return err
		}
		threads = max(rowThreads, min(wideRowThread, p.MaxThreads())&^31)
	}
	return b.launch(unit, kernel, [3]int{groups}, [3]int{threads}, args...)
}

// Arguments.

func memArg(m Mem, off int64) Arg { return Arg{Mem: m, Off: int(off)} }
func u32Arg(v uint32) Arg         { return Arg{Scalar: binary.LittleEndian.AppendUint32(nil, v)} }
func i32Arg(v int32) Arg          { return u32Arg(uint32(v)) }
func u64Arg(v uint64) Arg         { return Arg{Scalar: binary.LittleEndian.AppendUint64(nil, v)} }
func f32Arg(v float32) Arg        { return u32Arg(math.Float32bits(v)) }

// bufArg is a buffer's memory from value off on.
func bufArg(mb *metalBuf, off int) Arg { return Arg{Mem: mb.m, Off: 4 * off} }

// u32Of returns n as a u32 kernel argument, or an error naming what when it
// does not fit.
func u32Of(n int64, what string) (uint32, error) {
	if n < 0 || n > math.MaxUint32 {
		return 0, fmt.Errorf("%w: metal: %s %d does not fit the kernels' 32-bit sizes", ErrArgument, what, n)
	}
	return uint32(n), nil
}
