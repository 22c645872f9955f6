package metal

import (
	"cmp"
	"fmt"
	"unsafe"
)

// maxDispatchesPerBuffer bounds one command buffer: past it, the batch is
// committed and a new one started (Sync still waits for all). A model step
// is well under it, so a step is one command buffer.
const maxDispatchesPerBuffer = 4096

// Dispatch encodes one launch of p: groups threadgroups (x, y, z) of
// threads threads each, with args bound at buffer indices 0, 1, …: a Mem at
// offset Off (setBuffer:offset:atIndex:) or a scalar's bytes
// (setBytes:length:atIndex:, copied at once, at most 4 KiB). It checks the
// launch first: p and every Mem of this engine and live (ErrForeign), every
// threadgroup dimension within the device's bound and the total within
// p.MaxThreads() (ErrGeometry), offsets within their buffers, at most 31
// args (ErrArgument; the other two are ErrArgument too). A
// grid with a zero dimension runs nothing. The launch runs at the next Sync
// (or earlier, when the batch is long), where its errors surface.
func (e *DeviceEngine) Dispatch(p Pipeline, groups, threads [3]int, args ...Arg) error {
	if e.closed {
		return ErrClosed
	}
	dp, ok := p.(*devicePipeline)
	if !ok || dp.e != e || dp.state == 0 {
		return fmt.Errorf("%w: a pipeline of another engine", ErrForeign)
	}
	empty, err := checkGrid(groups, threads, dp.maxThreads, e.caps.MaxThreadsPerThreadgroup)
	if err != nil {
		return fmt.Errorf("dispatching %s: %w", dp.kernel, err)
	}
	if len(args) > maxArgs {
		return fmt.Errorf("dispatching %s: %w: %d arguments (at most %d)", dp.kernel, ErrArgument, len(args), maxArgs)
	}
	mems := make([]*deviceMem, len(args))
	for i, a := range args {
		size := 0
		if a.Mem != nil {
			if mems[i], err = e.ownMem(i, a.Mem); err != nil {
				return fmt.Errorf("dispatching %s: %w", dp.kernel, err)
			}
			size = len(mems[i].b)
		}
		if err := checkArg(i, a, size); err != nil {
			return fmt.Errorf("dispatching %s: %w", dp.kernel, err)
		}
	}
	if empty {
		return nil
	}
	return inPool(func() error {
		if err := e.begin(); err != nil {
			return err
		}
		e.enc.Send(sel.setComputePipelineState, dp.state)
		for i, a := range args {
			if m := mems[i]; m != nil {
				lib.setBuffer(e.enc, sel.setBuffer, m.buf, uint(a.Off), uint(i))
			} else {
				lib.setBytes(e.enc, sel.setBytes, unsafe.Pointer(unsafe.SliceData(a.Scalar)), uint(len(a.Scalar)), uint(i))
			}
		}
		// Two MTLSize values by value: purego passes each as a pointer to a
		// copy, as AAPCS64 does for composites over 16 bytes.
		lib.dispatch(e.enc, sel.dispatchThreadgroups, sizeOf(groups), sizeOf(threads))
		if e.queued++; e.queued >= maxDispatchesPerBuffer {
			e.commit()
		}
		return nil
	})
}

// begin opens a batch if none is open: a command buffer and its compute
// encoder (serial dispatch), both autoreleased by Metal and retained here
// (inside a pool).
func (e *DeviceEngine) begin() error {
	if e.enc != 0 {
		return nil
	}
	cb := e.queue.Send(sel.commandBuffer)
	if cb == 0 {
		return fmt.Errorf("%w: %s gave no command buffer", ErrCommand, e.caps.Name)
	}
	enc := cb.Send(sel.computeCommandEncoder)
	if enc == 0 {
		return fmt.Errorf("%w: %s gave no compute encoder", ErrCommand, e.caps.Name)
	}
	e.cb, e.enc, e.queued = retain(cb), retain(enc), 0
	return nil
}

// commit ends the open batch's encoding and commits its command buffer,
// which Sync waits for (inside a pool).
func (e *DeviceEngine) commit() {
	if e.enc == 0 {
		return
	}
	e.enc.Send(sel.endEncoding)
	release(e.enc)
	e.cb.Send(sel.commit)
	e.inflight = append(e.inflight, e.cb)
	e.cb, e.enc, e.queued = 0, 0, 0
}

// Sync commits the open batch and waits for every committed command buffer,
// in order. It returns the first one's error (ErrCommand with Metal's
// description, in one line: the watchdog's timeout, a GPU page fault, …);
// the engine stays usable.
func (e *DeviceEngine) Sync() error {
	if e.closed {
		return ErrClosed
	}
	var first error
	_ = inPool(func() error {
		e.commit()
		for _, cb := range e.inflight {
			cb.Send(sel.waitUntilCompleted)
			// status is an NSUInteger (full register); error is read only
			// when the status says the buffer failed.
			if first == nil && uint(cb.Send(sel.status)) == mtlCommandBufferStatusError {
				desc := cmp.Or(nsErrorText(cb.Send(sel.errorSel)), "Metal gave no reason")
				first = fmt.Errorf("%w on %s: %s", ErrCommand, e.caps.Name, oneLine(desc, maxErrorText))
			}
			release(cb)
		}
		clear(e.inflight)
		e.inflight = e.inflight[:0]
		return nil
	})
	return first
}

// Compile-time checks that the darwin types fill the seam.
var (
	_ Mem      = (*deviceMem)(nil)
	_ Pipeline = (*devicePipeline)(nil)
)
