package selftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/runtime/backend"
)

// doctorOpenTimeout bounds how long Doctor waits for one backend to open (a
// driver that hangs on initialization).
const doctorOpenTimeout = time.Minute

// DoctorReport is what Doctor found: this machine for dgq (dgq doctor
// --json).
type DoctorReport struct {
	// Environment is the machine (as the self-test's report has it): OS and
	// version, kernel, architecture, CPU, memory total and available.
	Environment Environment `json:"environment"`
	// CPUFeatures are the CPU's SIMD features that dgq may use (see
	// cpuFeatures), CodecKernels the codecs' choice of kernels from them
	// (codecs.Kernels).
	CPUFeatures  []string              `json:"cpu_features"`
	CodecKernels []codecs.KernelChoice `json:"codec_kernels"`
	// Backends are the registered backends (backend.Names), in order, each
	// opened at f32 and closed again.
	Backends []BackendStatus `json:"backends"`
	// HFCache is the Hugging Face hub cache dgq reads (hfcache.CacheRoot).
	HFCache CacheInfo `json:"hf_cache"`
	// HFToken says whether a Hugging Face token is configured (never the
	// token).
	HFToken TokenInfo `json:"hf_token"`
	// WorkDir is the free space of the working directory.
	WorkDir DiskInfo `json:"work_dir"`
	// Build is this dgq binary.
	Build          Build   `json:"dgq"`
	ElapsedSeconds float64 `json:"elapsed_s"`
}

// BackendStatus is one registered backend as Doctor found it.
type BackendStatus struct {
	Name string `json:"name"`
	// Precision is the precision it was opened at (f32).
	Precision string `json:"precision"`
	// Usable: it opened. When not, Reason says why in one line (the
	// backend's error: no device, a library missing, a timeout).
	Usable bool   `json:"usable"`
	Reason string `json:"reason,omitempty"`
	// Device describes its hardware and driver (backend.DeviceDescriber),
	// Kernels its choice per op (Caps().Kernels), when it tells.
	Device  *backend.DeviceInfo `json:"device,omitempty"`
	Kernels map[string]string   `json:"kernels,omitempty"`
	// OpenSeconds is how long opening and closing it took.
	OpenSeconds float64 `json:"open_s"`
}

// CacheInfo is the Hugging Face hub cache.
type CacheInfo struct {
	// Dir is the cache folder and Source the variable that chose it
	// (hfcache.CacheRoot: DGQ_HF_HOME, HF_HUB_CACHE, … or "default").
	Dir    string `json:"dir"`
	Source string `json:"source"`
	// Exists: Dir is a folder.
	Exists bool `json:"exists"`
	// Disk is the free space where it is (or would be made).
	Disk DiskInfo `json:"disk"`
}

// Doctor describes this machine for dgq: the system, the CPU's features
// and the codec kernels they select, every registered backend (usable, or
// why not), the Hugging Face cache and token, the free space at the cache
// and the working directory, and this build. Nothing it finds is an error:
// an unusable backend is reported with its reason. The error is ctx's
// alone, when it ends before the report is made.
func Doctor(ctx context.Context) (*DoctorReport, error) {
	start := time.Now()
	rep := &DoctorReport{
		Environment:  collectEnvironment(ctx),
		CPUFeatures:  cpuFeatures(),
		CodecKernels: codecs.Kernels(),
		Backends:     []BackendStatus{},
		HFToken:      findToken(),
		Build:        ReadBuild(),
	}
	for _, name := range backend.Names() {
		st, err := doctorBackend(ctx, name)
		if err != nil {
			return nil, err
		}
		rep.Backends = append(rep.Backends, st)
	}
	dir, source := hfcache.CacheRoot()
	rep.HFCache = CacheInfo{Dir: dir, Source: source, Disk: measureDisk(dir)}
	if fi, err := os.Stat(dir); dir != "" && err == nil && fi.IsDir() {
		rep.HFCache.Exists = true
	}
	if wd, err := os.Getwd(); err != nil {
		rep.WorkDir = DiskInfo{Error: "working directory unknown: " + oneLine(err.Error())}
	} else {
		rep.WorkDir = measureDisk(wd)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.ElapsedSeconds = time.Since(start).Seconds()
	return rep, nil
}

// errOpenTimeout is the cause of a backend's open outlasting
// doctorOpenTimeout.
var errOpenTimeout = fmt.Errorf("no answer within %v", doctorOpenTimeout)

// doctorBackend opens the backend name (openBackend, within
// doctorOpenTimeout), closes it at once and reports it; the error is ctx's
// alone.
func doctorBackend(ctx context.Context, name string) (BackendStatus, error) {
	t0 := time.Now()
	octx, cancel := context.WithTimeoutCause(ctx, doctorOpenTimeout, errOpenTimeout)
	defer cancel()
	b, info, err := openBackend(octx, name, backend.Config{})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return BackendStatus{}, err
	}
	st := BackendStatus{Name: name, Precision: info.Precision, Usable: info.Available, Reason: info.Reason,
		Device: info.Device, Kernels: info.Kernels}
	if b != nil {
		if cerr := b.Close(); cerr != nil {
			st.Usable, st.Reason = false, "opened but did not close: "+oneLine(cerr.Error())
		}
	}
	st.OpenSeconds = time.Since(t0).Seconds()
	return st, nil
}
