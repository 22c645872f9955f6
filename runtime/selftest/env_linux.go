package selftest

import (
	"bufio"
	"context"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dgq-dev/dgq/runtime/session"
)

// describeSystem reads /etc/os-release, uname, /proc/cpuinfo and the
// memory as session.HostMemory reads it (/proc/meminfo).
func describeSystem(_ context.Context, e *Environment) {
	if kv := readKV("/etc/os-release", "="); kv["PRETTY_NAME"] != "" {
		e.OSVersion = strings.Trim(kv["PRETTY_NAME"], `"`)
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	e.CPU = readKV("/proc/cpuinfo", ":")["model name"]
	e.MemoryBytes, e.MemoryAvailableBytes = session.HostMemory() // what the memory estimate checks against
}

// readKV reads the first value of each key of a "key<sep>value" file.
func readKV(path, sep string) map[string]string {
	m := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if k = strings.TrimSpace(k); ok && m[k] == "" {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}
