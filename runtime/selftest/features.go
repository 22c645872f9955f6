package selftest

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// cpuFeature is one SIMD feature of a CPU as golang.org/x/sys/cpu detects
// it (the CPU's and the operating system's support together).
type cpuFeature struct {
	name string
	has  bool
}

// cpuFeatures lists the SIMD and arithmetic features of this machine's CPU
// that it has, in a fixed order: on amd64 the SSE, AVX, FMA, F16C, AVX-512
// and AMX families; on arm64 NEON (asimd), fp16, dotprod, fhm, i8mm, SVE
// and LSE atomics; nothing elsewhere. The codecs' own choice from them is
// codecs.Kernels.
func cpuFeatures() []string {
	var fs []cpuFeature
	switch runtime.GOARCH {
	case "amd64", "386":
		x := &cpu.X86
		fs = []cpuFeature{
			{"sse2", x.HasSSE2}, {"sse3", x.HasSSE3}, {"ssse3", x.HasSSSE3}, {"sse4.1", x.HasSSE41},
			{"sse4.2", x.HasSSE42}, {"popcnt", x.HasPOPCNT}, {"avx", x.HasAVX}, {"avx2", x.HasAVX2},
			{"fma", x.HasFMA}, {"f16c", x.HasF16C}, {"bmi1", x.HasBMI1}, {"bmi2", x.HasBMI2},
			{"avx-vnni", x.HasAVXVNNI}, {"avx512f", x.HasAVX512F}, {"avx512cd", x.HasAVX512CD},
			{"avx512bw", x.HasAVX512BW}, {"avx512dq", x.HasAVX512DQ}, {"avx512vl", x.HasAVX512VL},
			{"avx512vnni", x.HasAVX512VNNI}, {"avx512bf16", x.HasAVX512BF16}, {"avx512vbmi", x.HasAVX512VBMI},
			{"amx-tile", x.HasAMXTile}, {"amx-int8", x.HasAMXInt8}, {"amx-bf16", x.HasAMXBF16},
		}
	case "arm64":
		a := &cpu.ARM64
		fs = []cpuFeature{
			{"asimd", a.HasASIMD}, {"fp16", a.HasFPHP && a.HasASIMDHP}, {"dotprod", a.HasASIMDDP},
			{"fhm", a.HasASIMDFHM}, {"i8mm", a.HasI8MM}, {"sve", a.HasSVE}, {"sve2", a.HasSVE2},
			{"lse", a.HasATOMICS},
		}
	}
	names := []string{}
	for _, f := range fs {
		if f.has {
			names = append(names, f.name)
		}
	}
	return names
}
