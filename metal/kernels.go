package metal

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// The translation units both engines compile: the kernel files of the
// shared dialect (runtime/kernels/*.kern) and the Metal-specific files of
// metal/kernels (*.metal: the SIMD-group matrix products, copies), each
// under a compile plan's header, the Metal prelude and the common include
// (UnitSourceFor).

//go:embed kernels/*.metal
var metalFiles embed.FS

// MetalFiles lists the Metal-specific kernel files ("copy.metal", …), sorted.
func MetalFiles() []string {
	ents, err := fs.ReadDir(metalFiles, "kernels")
	if err != nil {
		return nil // the embedded directory always reads
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// unitBody returns the source of a unit's kernel file, without prelude or
// common include: a Metal-specific file (*.metal) or a dialect file. An
// unknown name wraps ErrNoSource.
func unitBody(unit string) (string, error) {
	if strings.HasSuffix(unit, ".metal") {
		b, err := metalFiles.ReadFile("kernels/" + unit)
		if err != nil {
			return "", fmt.Errorf("%w for unit %q: no such Metal kernel file", ErrNoSource, unit)
		}
		return string(b), nil
	}
	src, err := kernels.Source(unit)
	if err != nil {
		return "", fmt.Errorf("%w for unit %q: %w", ErrNoSource, unit, err)
	}
	return src, nil
}
