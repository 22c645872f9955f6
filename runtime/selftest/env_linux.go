package selftest

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// describeSystem reads /etc/os-release, uname, /proc/cpuinfo and
// /proc/meminfo (the total and the available memory).
func describeSystem(_ context.Context, e *Environment) {
	if kv := readKV("/etc/os-release", "="); kv["PRETTY_NAME"] != "" {
		e.OSVersion = strings.Trim(kv["PRETTY_NAME"], `"`)
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		e.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	e.CPU = readKV("/proc/cpuinfo", ":")["model name"]
	mem := readKV("/proc/meminfo", ":")
	e.MemoryBytes, e.MemoryAvailableBytes = kiB(mem["MemTotal"]), kiB(mem["MemAvailable"])
}

// kiB reads a /proc/meminfo value ("16316412 kB") in bytes; 0 when it is
// not one.
func kiB(v string) uint64 {
	if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
		if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			return kb << 10
		}
	}
	return 0
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
