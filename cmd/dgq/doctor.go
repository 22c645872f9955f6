package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/selftest"
)

func newDoctorCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Describe this machine for dgq: CPU features and codec kernels, backends, Hugging Face cache and token, free disk",
		Long: `doctor describes this machine for dgq in a few seconds, running nothing heavy: the OS and its version, the
kernel, the architecture, the CPU and its SIMD features, which codec kernels run on it (AVX-512 or the generic
reference: the bytes are the same, the speed is not), the memory (total, and available where the system says),
every backend built in (opened and closed again: usable, with its device, or the reason it cannot run), the
Hugging Face hub cache and the variable that chose it, whether a Hugging Face token is configured and where (never
the token), the free space at the cache and at the working directory, and this build's version and commit.
--json prints the same as one object.

doctor does not fail because a backend cannot run here: the reason is printed and the exit code is 0.
Exit codes: 0; 2 usage; 130 interrupted (143 by SIGTERM).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := selftest.Doctor(e.ctx)
			if err != nil {
				return fmt.Errorf("doctor: %w", err)
			}
			if asJSON {
				return writeJSON(e.stdout, r)
			}
			renderDoctor(e.stdout, r)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	return c
}

// renderDoctor prints a doctor report as text, one fact per line.
func renderDoctor(w io.Writer, r *selftest.DoctorReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(key, format string, a ...any) { fmt.Fprintf(tw, key+"\t"+format+"\n", a...) }
	b := r.Build
	line("dgq", "%s, commit %s%s", b.Version, commitText(b), yesNo(b.Modified, " (modified)", ""))
	line("go", "%s %s/%s", b.GoVersion, b.GOOS, b.GOARCH)
	env := r.Environment
	line("os", "%s", strings.TrimSpace(env.OS+" "+parenthesized(env.OSVersion)))
	line("kernel", "%s", orUnknown(env.Kernel))
	line("arch", "%s", env.Arch)
	line("cpu", "%s, %d logical CPUs", orUnknown(env.CPU), env.CPUs)
	line("cpu features", "%s", orNone(strings.Join(r.CPUFeatures, " ")))
	line("memory", "%s total, %s available", bytesText(env.MemoryBytes), bytesText(env.MemoryAvailableBytes))
	for _, g := range env.GPUs {
		line("gpu", "%s, %s cores, %s", g.Model, orUnknown(g.Cores), orUnknown(g.Metal))
	}
	for _, k := range r.CodecKernels {
		if k.Note != "" {
			line("codec kernel", "%s: %s (%s)", k.Name, k.Impl, k.Note)
		} else {
			line("codec kernel", "%s: %s", k.Name, k.Impl)
		}
	}
	for _, s := range r.Backends {
		line("backend "+s.Name, "%s", backendText(s))
	}
	c := r.HFCache
	line("hf cache", "%s (%s), %s", orUnknown(c.Dir), sourceText(c.Source), yesNo(c.Exists, "exists", "does not exist yet"))
	line("hf token", "%s", tokenText(r.HFToken))
	line("disk at hf cache", "%s", diskText(c.Disk))
	line("disk at work dir", "%s", diskText(r.WorkDir))
	tw.Flush()
}

// backendText is a backend's line: usable with its device and kernels, or
// unusable and why.
func backendText(s selftest.BackendStatus) string {
	if !s.Usable {
		return "unusable: " + s.Reason
	}
	parts := []string{"usable (" + s.Precision + ")"}
	if d := s.Device; d != nil {
		parts = append(parts, deviceText(d))
	}
	if len(s.Kernels) > 0 {
		ops := make([]string, 0, len(s.Kernels))
		for op, k := range s.Kernels {
			ops = append(ops, op+"="+k)
		}
		sort.Strings(ops)
		parts = append(parts, "kernels "+strings.Join(ops, " "))
	}
	return strings.Join(parts, "; ")
}

// deviceText describes a backend's device in one line.
func deviceText(d *backend.DeviceInfo) string {
	f := []string{orUnknown(d.Name)}
	if d.Family != "" {
		f = append(f, d.Family)
	}
	if d.Cores > 0 {
		f = append(f, fmt.Sprintf("%d cores", d.Cores))
	}
	if d.Memory > 0 {
		f = append(f, bytesText(d.Memory))
	}
	if d.Driver != "" {
		f = append(f, "driver "+d.Driver)
	}
	if d.Compiler != "" {
		f = append(f, d.Compiler)
	}
	return strings.Join(f, ", ")
}

// tokenText says whether a Hugging Face token is present and where; it
// names places, never the token.
func tokenText(t selftest.TokenInfo) string {
	switch {
	case t.Present && t.Source == selftest.TokenSourceFile:
		return "present (file " + t.File + ")"
	case t.Present:
		return "present (from " + t.Source + ")"
	case t.Error != "":
		return "absent (the token file cannot be read: " + t.Error + ")"
	case t.File != "":
		return "absent (no " + selftest.EnvHFToken + ", no " + selftest.EnvHFTokenLegacy + ", no token in " + t.File + ")"
	default:
		return "absent (no " + selftest.EnvHFToken + ", no " + selftest.EnvHFTokenLegacy + ", home folder unknown)"
	}
}

// diskText is the free space of a disk, or why it is unknown.
func diskText(d selftest.DiskInfo) string {
	if d.Error != "" {
		return "unknown at " + orUnknown(d.Path) + ": " + d.Error
	}
	return fmt.Sprintf("%.1f GB free of %.1f GB at %s", float64(d.FreeBytes)/1e9, float64(d.TotalBytes)/1e9, d.MeasuredAt)
}

// sourceText names what chose the cache folder.
func sourceText(s string) string {
	if s == "" || s == hfcache.SourceDefault {
		return "the default"
	}
	return "from " + s
}

// bytesText writes a byte count in GB (10⁹ bytes, as selftest does);
// "unknown" for 0.
func bytesText(n uint64) string {
	if n == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func orNone(s string) string {
	if s == "" {
		return "none detected"
	}
	return s
}
