//go:build linux

package metal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/dgq-dev/dgq/metal/internal/msl"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Sanitizer builds. A sanitizer's runtime must start with its process, so a
// unit built with -fsanitize is an executable (the unit, its launchers, the
// runtime and hostrt/driver.c) and each launch runs in a child process: the
// buffers it names go in a request file, each in a heap block of exactly its
// size, and come back in a response file (hostrt/driver.c has the format).
// A report on the child's standard error is an error wrapping ErrSanitizer.

// sanitizerMarks start a sanitizer's report.
var sanitizerMarks = []string{"WARNING: ThreadSanitizer:", "ERROR: AddressSanitizer:", "ERROR: LeakSanitizer:"}

// runSanitized runs one launch in the unit's sanitizer executable.
func (e *HostEngine) runSanitized(ctx context.Context, l hostLaunch) error {
	// Each distinct buffer goes once, so that aliased arguments stay aliased.
	var mems []*hostMem
	var bufs [][]byte
	index := map[*hostMem]int{}
	var req bytes.Buffer
	le := binary.LittleEndian
	req.WriteString("DGQR")
	req.Write(le.AppendUint32(nil, uint32(len(l.p.sig.Name))))
	req.WriteString(l.p.sig.Name)
	for _, d := range append(l.groups[:], l.threads[:]...) {
		req.Write(le.AppendUint32(nil, uint32(d)))
	}
	for _, a := range l.args {
		if a.mem == nil {
			continue
		}
		if _, ok := index[a.mem]; !ok {
			index[a.mem] = len(mems)
			mems = append(mems, a.mem)
			bufs = append(bufs, a.buf)
		}
	}
	req.Write(le.AppendUint32(nil, uint32(len(bufs))))
	for _, b := range bufs {
		req.Write(le.AppendUint64(nil, uint64(len(b))))
		req.Write(b)
	}
	req.Write(le.AppendUint32(nil, uint32(len(l.args))))
	for _, a := range l.args {
		if a.mem == nil {
			req.Write(le.AppendUint32(nil, 1))
			req.Write(le.AppendUint32(nil, uint32(len(a.scalar))))
			req.Write(a.scalar)
			continue
		}
		req.Write(le.AppendUint32(nil, 0))
		req.Write(le.AppendUint32(nil, uint32(index[a.mem])))
		req.Write(le.AppendUint64(nil, uint64(a.off)))
	}
	reqPath := filepath.Join(e.dir, "request.bin")
	respPath := filepath.Join(e.dir, "response.bin")
	if err := os.WriteFile(reqPath, req.Bytes(), 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrCommand, err)
	}
	cmd := exec.CommandContext(ctx, l.p.unit.path, reqPath, respPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	if report := sanitizerReport(stderr.String()); report != "" {
		return fmt.Errorf("%w (%s): %s", ErrSanitizer, e.opts.Sanitizer, report)
	}
	if runErr != nil {
		var exit *exec.ExitError
		if errors.As(runErr, &exit) {
			return fmt.Errorf("%w: driver exited with %d: %s", ErrCommand, exit.ExitCode(), msl.FirstLines(stderr.String(), 6))
		}
		return fmt.Errorf("%w: %w", ErrCommand, runErr)
	}
	resp, err := os.ReadFile(respPath)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCommand, err)
	}
	want := 8
	for _, b := range bufs {
		want += len(b)
	}
	if len(resp) != want || string(resp[:4]) != "DGQA" {
		return fmt.Errorf("%w: response of %d bytes, want %d", ErrCommand, len(resp), want)
	}
	rc := int32(le.Uint32(resp[4:8]))
	at := 8
	for i, b := range bufs {
		if !mems[i].ro {
			copy(b, resp[at:at+len(b)])
		}
		at += len(b)
	}
	return launchError(rc)
}

// sanitizerReport returns the start of a sanitizer's report in a child's
// standard error (its first lines: the kind, the accesses and their places),
// or "".
func sanitizerReport(s string) string {
	at := -1
	for _, m := range sanitizerMarks {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return ""
	}
	return msl.FirstLines(s[at:], 12)
}
