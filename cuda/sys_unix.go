//go:build linux || darwin

package cuda

import "github.com/ebitengine/purego"

// dlopen loads a shared library by name or path.
func dlopen(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// dlsym resolves a symbol of a library loaded by dlopen.
func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// ccall calls a C function whose arguments are all integers or pointers and
// returns its integer result.
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
