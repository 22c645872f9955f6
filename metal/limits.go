package metal

import (
	"fmt"
	"strings"
)

// The checks the device engine applies before it hands anything to Metal.
// They are plain Go, so that they are tested on every platform.

// ApplePageSize is the virtual-memory page of macOS on Apple silicon,
// 16 KiB: the alignment of a no-copy buffer's start and length, and the
// alignment of a pack's expert_split (docs/format.md §6.1), so that a pack's
// mapped blob can be wrapped as one or two no-copy buffers.
const ApplePageSize = 16 << 10

// Limits of a dispatch's arguments (Metal's argument tables and setBytes).
const (
	// maxArgs is the size of a compute encoder's buffer argument table:
	// indices 0 … 30.
	maxArgs = 31
	// maxScalarBytes is the most bytes setBytes:length:atIndex: should carry
	// (Apple: "for single-use data smaller than 4 KB").
	maxScalarBytes = 4 << 10
)

// wrapLength checks a no-copy region of n bytes at address addr for a device
// whose largest buffer is maxLen bytes, and returns the length to wrap: n
// rounded up to a whole page. The start must lie on a page boundary
// (ErrUnaligned). Rounding the length up is safe: memory is mapped in whole
// pages, so the page holding the region's last byte is mapped to its end
// (a mapped file's last page reads as zeros past the end of the file). The
// rounded length must fit maxLen (ErrBufferLimit, naming the limit).
func wrapLength(addr uintptr, n, page int, maxLen uint64) (int, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: an empty region cannot be wrapped", ErrArgument)
	}
	if off := addr % uintptr(page); off != 0 {
		return 0, fmt.Errorf("%w: the region starts %d bytes past a %d-byte page boundary", ErrUnaligned, off, page)
	}
	padded := (n + page - 1) / page * page
	if padded < n || uint64(padded) > maxLen {
		return 0, fmt.Errorf("%w: %d bytes (%d with the last page) > maxBufferLength %d: wrap the region in parts (a pack's blob splits at expert_split)",
			ErrBufferLimit, n, padded, maxLen)
	}
	return padded, nil
}

// checkAlloc checks an allocation of n bytes against maxLen and returns the
// length to ask Metal for: at least 4 bytes (Metal has no empty buffer).
func checkAlloc(n int, maxLen uint64) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: Alloc of %d bytes", ErrArgument, n)
	}
	if uint64(n) > maxLen {
		return 0, fmt.Errorf("%w: Alloc of %d bytes > maxBufferLength %d", ErrBufferLimit, n, maxLen)
	}
	return max(n, 4), nil
}

// checkGrid checks a dispatch of groups threadgroups of threads threads
// each against a pipeline's maxTotal threads per threadgroup and the
// device's per-dimension maximum perDim (ErrGeometry). It reports empty (a grid with no
// threadgroup: nothing to run) for a zero in groups.
func checkGrid(groups, threads [3]int, maxTotal int, perDim [3]int) (empty bool, err error) {
	total := 1
	for i := range 3 {
		if threads[i] < 1 || threads[i] > perDim[i] {
			return false, fmt.Errorf("%w: threadgroup %v: dimension %d must be 1…%d", ErrGeometry, threads, i, perDim[i])
		}
		total *= threads[i]
		if groups[i] < 0 || groups[i] > 1<<31 {
			return false, fmt.Errorf("%w: grid %v of threadgroups", ErrGeometry, groups)
		}
		if groups[i] == 0 {
			empty = true
		}
	}
	if total > maxTotal {
		return false, fmt.Errorf("%w: threadgroup %v has %d threads > the pipeline's maxTotalThreadsPerThreadgroup %d", ErrGeometry, threads, total, maxTotal)
	}
	return empty, nil
}

// checkArg checks one argument's shape: a buffer offset within a buffer of
// size bytes, or a scalar of 1…maxScalarBytes bytes.
func checkArg(i int, a Arg, size int) error {
	switch {
	case a.Mem == nil && (len(a.Scalar) == 0 || len(a.Scalar) > maxScalarBytes):
		return fmt.Errorf("%w: argument %d: a scalar of %d bytes (1…%d)", ErrArgument, i, len(a.Scalar), maxScalarBytes)
	case a.Mem != nil && a.Scalar != nil:
		return fmt.Errorf("%w: argument %d is both a buffer and a scalar", ErrArgument, i)
	case a.Mem != nil && (a.Off < 0 || a.Off > size):
		return fmt.Errorf("%w: argument %d: offset %d outside a buffer of %d bytes", ErrArgument, i, a.Off, size)
	}
	return nil
}

// oneLine folds a multi-line message (a compiler log, an NSError
// description) into one line: lines trimmed, empty ones dropped, joined by
// " | ", cut to limit bytes (on a rune boundary) with "…".
func oneLine(s string, limit int) string {
	var parts []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			parts = append(parts, line)
		}
	}
	out := strings.Join(parts, " | ")
	if len(out) <= limit {
		return out
	}
	cut := limit
	for cut > 0 && out[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return out[:cut] + "…"
}
