package metal

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

// The host engine's sources: its runtime, its sanitizer driver, and the
// launchers generated per unit from the kernels' signatures.

// Host runtime sources (hostrt/: C files live outside the Go package, which
// has no cgo).
var (
	//go:embed hostrt/fibers.c
	hostFibersC string
	//go:embed hostrt/threads.c
	hostThreadsC string
	//go:embed hostrt/runtime.h
	hostRuntimeH string
	//go:embed hostrt/fpmode.h
	hostFPModeH string
	//go:embed hostrt/driver.c
	hostDriverC string
	//go:embed hostrt/specmath.c
	hostSpecMathC string
)

// Positions in a thread's geo[] (hostrt/runtime.h's DGQ_GEO_*), in the order
// of the thread-position parameters the Metal prelude's KERNEL appends.
const (
	geoLID     = 0
	geoGID     = 3
	geoLSize   = 6
	geoNGroups = 9
	geoLane    = 12
	geoSIMD    = 13
)

// hostLaunchers returns the C++ that follows a unit's Metal text in a host
// build: per kernel, a body that calls it for one thread with its arguments
// and thread positions (dgq_body_<name>), an exported launcher that runs the
// body for every thread of a launch (dgq_launch_<name>(args, dims), dims the
// groups then the threads per group, returning 0 or a runtime error code),
// and the table of launchers a sanitizer build's driver looks kernels up in.
// args[i] is parameter i's buffer pointer or a pointer to its scalar bytes.
func hostLaunchers(sigs []kernels.Signature) string {
	var b strings.Builder
	b.WriteString(`
#line 1 "host-launchers"
typedef void (*dgq_body)(void* const* args, const unsigned* geo);
extern "C" int dgq_rt_run(dgq_body body, void* const* args, const unsigned* dims);
struct dgq_entry {
	const char* name;
	int (*launch)(void* const* args, const unsigned* dims);
};
static inline uint3 dgq_u3(const unsigned* p) {
	uint3 v;
	v.x = p[0];
	v.y = p[1];
	v.z = p[2];
	return v;
}
`)
	for _, s := range sigs {
		args := make([]string, 0, len(s.Params)+6)
		for i, p := range s.Params {
			switch p.Kind {
			case kernels.Buf:
				args = append(args, fmt.Sprintf("(%s*)a[%d]", p.Type, i))
			case kernels.CBuf:
				args = append(args, fmt.Sprintf("(const %s*)a[%d]", p.Type, i))
			default:
				args = append(args, fmt.Sprintf("*(const %s*)a[%d]", p.Type, i))
			}
		}
		args = append(args, fmt.Sprintf("dgq_u3(g + %d)", geoLID), fmt.Sprintf("dgq_u3(g + %d)", geoGID),
			fmt.Sprintf("dgq_u3(g + %d)", geoLSize), fmt.Sprintf("dgq_u3(g + %d)", geoNGroups),
			fmt.Sprintf("g[%d]", geoLane), fmt.Sprintf("g[%d]", geoSIMD))
		fmt.Fprintf(&b, "static void dgq_body_%s(void* const* a, const unsigned* g) {\n\t%s(%s);\n}\n",
			s.Name, s.Name, strings.Join(args, ", "))
		fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"default\"))) int dgq_launch_%s(void* const* a, const unsigned* dims) {\n\treturn dgq_rt_run(dgq_body_%s, a, dims);\n}\n",
			s.Name, s.Name)
	}
	b.WriteString("extern \"C\" __attribute__((visibility(\"default\"))) const dgq_entry dgq_entries[] = {\n")
	for _, s := range sigs {
		fmt.Fprintf(&b, "\t{%q, dgq_launch_%s},\n", s.Name, s.Name)
	}
	b.WriteString("\t{0, 0},\n};\n")
	return b.String()
}
