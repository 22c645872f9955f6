package msl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// ErrMSL is wrapped by the error for a unit that fails the check; the error
// is an *Error that holds clang's diagnostics.
var ErrMSL = errors.New("msl: not valid Metal")

// CheckFlags are clang's options for the check, besides the include
// directory and the files (the package comment says why each).
var CheckFlags = []string{
	"-x", "c++", "-std=c++14", "-nostdinc", "-nostdinc++", "-fno-exceptions", "-fno-rtti",
	"-Werror", "-Wall", "-Wextra", "-pedantic", "-Wconversion", "-Wshadow-all", "-Wdouble-promotion", "-Wvla", "-Wgnu",
	"-Wno-unused-parameter", "-Wno-unused-function", "-Wno-unknown-pragmas",
	"-fno-color-diagnostics", "-fno-caret-diagnostics", "-ferror-limit=20",
}

// Diagnostic is one message of the check.
type Diagnostic struct {
	Pos      Position
	Col      int    // 0 when unknown
	Severity string // "error", "warning", "note" (or "fatal error")
	Message  string
}

func (d Diagnostic) String() string {
	pos := d.Pos.String()
	if d.Col > 0 {
		pos += ":" + strconv.Itoa(d.Col)
	}
	return pos + ": " + d.Severity + ": " + d.Message
}

// Error is a failed check: its diagnostics, first first, and clang's whole
// output (empty for a finding of the package's own scans). It wraps ErrMSL.
type Error struct {
	Diagnostics []Diagnostic
	Log         string
}

// maxShown is how many diagnostics Error's message gives.
const maxShown = 3

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(ErrMSL.Error())
	for i, d := range e.Diagnostics {
		if i == maxShown {
			fmt.Fprintf(&b, "\n\t(%d more)", len(e.Diagnostics)-maxShown)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(d.String())
	}
	if len(e.Diagnostics) == 0 && e.Log != "" {
		b.WriteString("\n\t")
		b.WriteString(FirstLines(e.Log, maxShown))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return ErrMSL }

// Check checks a Metal translation unit as the compiler of target tgt would
// see it (the package comment lists the rules). It returns nil, an error
// wrapping ErrMSL (an *Error), one wrapping ErrNoClang, or ctx's error.
func Check(ctx context.Context, unit string, tgt Target) error {
	lm := newLineMap(unit)
	if pos, msg, ok := scanSource(unit, lm); !ok {
		return &Error{Diagnostics: []Diagnostic{{Pos: pos, Severity: "error", Message: msg}}}
	}
	cl, err := FindClang()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dgq-msl-")
	if err != nil {
		return fmt.Errorf("msl: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := WriteInclude(dir); err != nil {
		return err
	}
	src := filepath.Join(dir, "unit.metal")
	if err := os.WriteFile(src, []byte(unit), 0o644); err != nil {
		return fmt.Errorf("msl: writing the unit: %w", err)
	}
	version := fmt.Sprintf("-D__METAL_VERSION__=%d", tgt.MetalVersion)
	run := func(args ...string) (string, error) {
		args = append(append(append([]string{}, CheckFlags...), version, "-I", dir), args...)
		cmd := exec.CommandContext(ctx, cl.Path, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		runErr := cmd.Run()
		if ctx.Err() != nil {
			return "", fmt.Errorf("msl: check interrupted: %w", ctx.Err())
		}
		if runErr != nil {
			var exit *exec.ExitError
			if !errors.As(runErr, &exit) {
				return "", fmt.Errorf("msl: running %s: %w", cl.Path, runErr)
			}
			log := stderr.String()
			return "", &Error{Diagnostics: parseDiagnostics(log, dir, lm), Log: log}
		}
		return stdout.String(), nil
	}
	// The preprocessed text first: its pragmas are what the compiler sees.
	pp, err := run("-E", "-o", "-", src)
	if err != nil {
		return err
	}
	if d, ok := checkPragmas(pp, tgt, "metal_stdlib"); !ok {
		if d.Pos.File == src {
			d.Pos = lm.at(d.Pos.Line)
		}
		return &Error{Diagnostics: []Diagnostic{d}}
	}
	ir, err := run("-S", "-emit-llvm", "-O0", "-gline-tables-only", "-o", "-", src)
	if err != nil {
		return err
	}
	if d, ok := checkIR(ir, unit, lm); !ok {
		return &Error{Diagnostics: []Diagnostic{d}}
	}
	return nil
}

var diagLine = regexp.MustCompile(`^(.*?):(\d+):(?:(\d+):)? (error|warning|note|fatal error): (.*)$`)

// parseDiagnostics reads clang's diagnostics. Positions in the unit file
// itself (before its first #line, or where clang names it) are mapped
// through lm; the header is named metal_stdlib.
func parseDiagnostics(log, dir string, lm lineMap) []Diagnostic {
	var ds []Diagnostic
	for _, l := range strings.Split(log, "\n") {
		m := diagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		line, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		file := m[1]
		pos := Position{File: file, Line: line}
		switch {
		case file == filepath.Join(dir, "unit.metal"):
			pos = lm.at(line)
		case strings.HasPrefix(file, dir+string(filepath.Separator)):
			pos.File = filepath.Base(file)
		}
		ds = append(ds, Diagnostic{Pos: pos, Col: col, Severity: m[4], Message: m[5]})
	}
	return ds
}

// FirstLines returns the first n nonempty lines of s (trimmed), joined by
// "\n\t": a tool's output quoted in an error.
func FirstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n\t")
}
