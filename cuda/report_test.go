package cuda

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/runtime/kernels"
)

func TestDriverVersion(t *testing.T) {
	for _, tc := range []struct {
		v    int
		want string
	}{
		{13000, "13.0"}, {12080, "12.8"}, {12020, "12.2"}, {11040, "11.4"}, {13010, "13.1"}, {9020, "9.2"},
		{0, ""}, {-1, ""},
	} {
		if got := driverVersion(tc.v); got != tc.want {
			t.Errorf("driverVersion(%d) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestKernelReportRefused checks the errors of a report that cannot be
// made (no GPU needed: both are found before the device is used).
func TestKernelReportRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&backend{d: &Device{}}).KernelReport(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("KernelReport with a canceled ctx: %v, want context.Canceled", err)
	}
	if _, err := (&backend{d: &Device{closed: true}}).KernelReport(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("KernelReport on a closed device: %v, want the device closed", err)
	}
}

// TestKernelReport compiles every kernel file on the GPU (skipped without
// one) and checks each kernel's limits (so that every kernel kernelNames
// lists is in its compiled module), that the report names every one of
// them, and that the backend's own modules are left alone.
func TestKernelReport(t *testing.T) {
	d, _ := device(t)
	b := newBackend(d, Options{})
	defer func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	own, err := b.ops.module("rmsnorm.kern")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := b.KernelReport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := b.ops.mods["rmsnorm.kern"]; !ok || m != own || m.h == 0 || len(b.ops.mods) != 1 {
		t.Errorf("the report changed the backend's modules: %v", b.ops.mods)
	}
	files := KernelFiles()
	if len(rep.Units) != len(files) {
		t.Fatalf("%d units for %d kernel files", len(rep.Units), len(files))
	}
	for i, u := range rep.Units {
		if u.Name != files[i] {
			t.Errorf("unit %d is %s, want %s", i, u.Name, files[i])
		}
		if u.Error != "" {
			t.Errorf("%s: %s\n%s", u.Name, u.Error, u.Log)
			continue
		}
		if strings.TrimSpace(u.Log) != "" {
			t.Logf("%s: log:\n%s", u.Name, u.Log)
		}
		want, err := kernelNames(u.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, k := range u.Kernels {
			got[k.Name] = true
			t.Logf("%s %s: max threads %d, warp %d, static shared %d B, %d registers", u.Name, k.Name, k.MaxThreads,
				k.SIMDWidth, k.StaticSharedBytes, k.Registers)
			switch {
			case k.Error != "":
				t.Errorf("%s %s: %s", u.Name, k.Name, k.Error)
			case k.MaxThreads < 32 || k.SIMDWidth != 32 || k.Registers <= 0 || k.StaticSharedBytes < 0:
				t.Errorf("%s %s: limits %+v", u.Name, k.Name, k)
			}
		}
		for _, n := range want {
			if !got[n] {
				t.Errorf("%s: kernel %s not reported", u.Name, n)
			}
		}
	}
	if n := rep.Failed(); n != 0 {
		t.Errorf("%d failed", n)
	}
	if rep.Kernels() == 0 {
		t.Error("no kernels reported")
	}
	// The report compiled afresh and wrote the cache: a Compile now reads it,
	// without a log.
	m, err := d.CompileKernel(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if d.CacheDir() != "" && (!m.Cached || m.Log != "") {
		t.Errorf("%s after the report: cached %v, log %q", files[0], m.Cached, m.Log)
	}
}

// TestCompileLog checks that a compile that succeeds keeps NVRTC's log (a
// warning here) in Module.Log.
func TestCompileLog(t *testing.T) {
	d, _ := device(t)
	const src = `extern "C" __global__ void warns(float* x) { int dgq_log_probe = 0; x[0] = 1.0f; }`
	m, err := d.compile("warns.cu", src, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Cached || !strings.Contains(m.Log, "dgq_log_probe") {
		t.Errorf("cached %v, log %q: want the unused variable's warning", m.Cached, m.Log)
	}
}

// TestDeviceInfo checks that the backend, owned or not, describes the
// device (on the GPU; skipped without one).
func TestDeviceInfo(t *testing.T) {
	d, _ := device(t)
	b := newBackend(d, Options{Precision: PrecisionBF16})
	defer b.Close()
	i := (&ownedBackend{backend: b}).DeviceInfo()
	t.Logf("%+v", i)
	if own := b.DeviceInfo(); !reflect.DeepEqual(own, i) {
		t.Errorf("owned backend's DeviceInfo %+v, backend's %+v", i, own)
	}
	if i.Name == "" || !strings.HasPrefix(i.Family, "sm_") || i.Cores <= 0 || i.Memory == 0 || i.Driver == "" ||
		!strings.HasPrefix(i.Compiler, "NVRTC ") {
		t.Errorf("DeviceInfo = %+v: a field is empty", i)
	}
	if i.Notes["precision"] != "bf16" || !strings.Contains(i.Notes["nvrtc_options"], "--gpu-architecture="+d.Arch()) {
		t.Errorf("DeviceInfo notes = %v", i.Notes)
	}
}

// TestKernelNames checks that every kernel file lists kernels, a shared
// dialect file those of its signatures.
func TestKernelNames(t *testing.T) {
	for _, f := range KernelFiles() {
		names, err := kernelNames(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: no kernels", f)
		}
		if _, ok := cudaFiles[f]; ok {
			continue
		}
		sigs, err := kernels.Signatures(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(sigs) != len(names) {
			t.Errorf("%s: %d names for %d signatures", f, len(names), len(sigs))
		}
	}
	if _, err := kernelNames("nope.kern"); !errors.Is(err, kernels.ErrUnknownFile) {
		t.Errorf("kernelNames(nope.kern): %v, want ErrUnknownFile", err)
	}
}

// TestMMAKernels checks mmaKernels against moe_mma.cu and the launch code:
// each name is defined in the file (a plain kernel on an extern "C"
// __global__ line, a q4 GEMM kernel by its prefix##NAME in Q4_INSTANCE's
// body and its configuration's Q4_INSTANCE(name, … line), the file defines
// no kernel the list lacks, and the package's Go code names these kernels
// only through the shared constants (each quoted once, where defined).
func TestMMAKernels(t *testing.T) {
	src := cudaFiles[mmaFile]
	lines := strings.Split(src, "\n")
	// defines: a line of the file that starts with start contains s.
	defines := func(start, s string) bool {
		return slices.ContainsFunc(lines, func(l string) bool {
			return strings.HasPrefix(strings.TrimSpace(l), start) && strings.Contains(l, s)
		})
	}
	const global = `extern "C" __global__`
	q4 := []q4Kernel{q4GateUp, q4Down, q4Dense}
	quoted := []string{}
	for _, k := range q4 {
		quoted = append(quoted, string(k))
	}
	names, seen := mmaKernels(), map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("%s listed twice", n)
		}
		seen[n] = true
		i := slices.IndexFunc(q4, func(k q4Kernel) bool { return strings.HasPrefix(n, string(k)) })
		if i >= 0 {
			cfg := strings.TrimPrefix(n, string(q4[i]))
			if !defines(global, " "+string(q4[i])+"##NAME(") || !defines("Q4_INSTANCE(", "Q4_INSTANCE("+cfg+",") {
				t.Errorf("%s: no %s##NAME( in Q4_INSTANCE or no Q4_INSTANCE(%s, in %s", n, q4[i], cfg, mmaFile)
			}
			continue
		}
		if !defines(global, " "+n+"(") {
			t.Errorf("%s: not defined in %s", n, mmaFile)
		}
		quoted = append(quoted, n)
	}
	plain := len(quoted) - len(q4)
	if got, want := len(names), plain+len(q4)*len(q4Configs); got != want {
		t.Errorf("%d names, want %d", got, want)
	}
	if got, want := strings.Count(src, global), plain+len(q4); got != want {
		t.Errorf("%s has %d %s, want %d (%d plain kernels, %d in Q4_INSTANCE): a kernel mmaKernels lacks",
			mmaFile, got, global, want, plain, len(q4))
	}
	if got := strings.Count(src, "\nQ4_INSTANCE("); got != len(q4Configs) {
		t.Errorf("%s has %d Q4_INSTANCE uses, want %d (q4Configs)", mmaFile, got, len(q4Configs))
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code.Write(b)
	}
	for _, n := range quoted {
		if c := strings.Count(code.String(), strconv.Quote(n)); c != 1 {
			t.Errorf("%q is in the package's Go code %d times, want once (its constant): launch it by the constant", n, c)
		}
	}
}
