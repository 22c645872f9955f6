package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.kern
var files embed.FS

// common is the common include (common.h).
//
//go:embed common.h
var common string

// commonName is the file name the common include's #line directive gives.
const commonName = "common.h"

// Files lists the dialect's kernel files, sorted ("attention.kern", …).
func Files() []string {
	ents, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil // the embedded root always reads
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Source returns a kernel file's dialect source, without prelude or common
// include; an unknown name gives an error wrapping ErrUnknownFile.
func Source(file string) (string, error) {
	b, err := files.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: %q", ErrUnknownFile, file)
	}
	return string(b), nil
}

// Common returns the common include, the helpers every translation unit
// gets after the prelude.
func Common() string { return common }

// Unit returns a translation unit: prelude, the common include, then body,
// each after a #line directive so that a compiler's messages name the file
// (the prelude's name is the backend's; name is body's).
func Unit(prelude, name, body string) string {
	var b strings.Builder
	b.Grow(len(prelude) + len(common) + len(body) + 64)
	b.WriteString(prelude)
	fmt.Fprintf(&b, "\n#line 1 %q\n", commonName)
	b.WriteString(common)
	fmt.Fprintf(&b, "\n#line 1 %q\n", name)
	b.WriteString(body)
	return b.String()
}

// FileUnit returns the translation unit of a kernel file for prelude
// (Unit of its Source).
func FileUnit(prelude, file string) (string, error) {
	src, err := Source(file)
	if err != nil {
		return "", err
	}
	return Unit(prelude, file, src), nil
}
