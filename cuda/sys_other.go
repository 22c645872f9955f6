//go:build !(linux || darwin)

package cuda

import (
	"errors"
	"runtime"
)

var errNoDlopen = errors.New("no dynamic loader on " + runtime.GOOS)

func dlopen(string) (uintptr, error)         { return 0, errNoDlopen }
func dlsym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }
func ccall(uintptr, ...uintptr) uintptr      { panic("cuda: no dynamic loader on " + runtime.GOOS) }
