// Command codecbench measures the codecs formats and the plain baselines on
// the seeded 1408×2816 bf16 test matrices (Gaussian and Student-t3, std
// 0.02) and prints the markdown table of docs/codecs.md.
//
//	go run ./codecs/internal/codecbench [-rows 1408 -k 2816 -reps 7]
//
// Everything runs on one goroutine locked to one OS thread with
// GOMAXPROCS=1. Speeds are elements per second of thread CPU time (best of
// -reps), which stays meaningful on a shared machine; the wall-clock speed
// of the same best run is printed too.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/codecs/internal/baseline"
	"github.com/dgq-dev/dgq/codecs/internal/testmat"
)

var (
	rows = flag.Int64("rows", 1408, "matrix rows")
	k    = flag.Int64("k", 2816, "matrix columns (K)")
	reps = flag.Int("reps", 7, "timed repetitions (best is reported)")
)

func main() {
	flag.Parse()
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	m := codecs.Matrix{Rows: *rows, K: *k}
	fmt.Printf("| scheme | dist | bpw | rel RMSE | max abs err | encode Gelem/s (cpu) | encode Gelem/s (wall) | decode Gelem/s (cpu) | decode Gelem/s (wall) |\n")
	fmt.Printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		x := make([]float32, m.Elements())
		if err := codecs.ToFloat32(codecs.BF16, src, x); err != nil {
			log.Fatal(err)
		}
		for _, f := range []codecs.Format{codecs.Q4, codecs.Q5, codecs.Q6, codecs.Q8, codecs.NVFP4} {
			row(f.String(), d, m, f, src)
		}
		out := make([]float32, len(x))
		for _, b := range []struct {
			name string
			bpw  float64
			run  func() codecs.Stats
		}{
			{"min/max affine 4-bit", 5, func() codecs.Stats { return baseline.MinMax(x, 4, out) }},
			{"min/max affine 5-bit", 6, func() codecs.Stats { return baseline.MinMax(x, 5, out) }},
			{"min/max affine 6-bit", 7, func() codecs.Stats { return baseline.MinMax(x, 6, out) }},
			{"int8 row amax/127", 8 + 32/float64(m.K), func() codecs.Stats { return baseline.RowAmax(x, int(m.K), out) }},
			{"nvfp4 plain ModelOpt", 4.5, func() codecs.Stats { return baseline.ModelOpt(x, out) }},
		} {
			var st codecs.Stats
			cpu, wall := best(func() { st = b.run() })
			n := float64(m.Elements())
			fmt.Printf("| %s (fake-quant) | %s | %.3f | %.3f%% | %.3g | %.3f | %.3f | – | – |\n", b.name, d, b.bpw, 100*st.RelRMSE(), st.MaxAbsErr, n/cpu/1e9, n/wall/1e9)
		}
	}
}

// row encodes and decodes the matrix in format f and prints its line.
func row(name string, d testmat.Dist, m codecs.Matrix, f codecs.Format, src []byte) {
	enc, err := codecs.NewEncoder(f, codecs.BF16, m)
	if err != nil {
		log.Fatal(err)
	}
	size, err := f.EncodedSize(codecs.BF16, m)
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, size)
	planes := enc.Planes()
	dst := make([][]byte, len(planes))
	for i, p := range planes {
		dst[i] = buf[p.Offset : p.Offset+p.Size]
	}
	var st codecs.Stats
	encode := func() {
		if enc.NeedsScan() {
			amax, err := enc.ScanRows(src)
			if err != nil {
				log.Fatal(err)
			}
			enc.SetAmax(amax)
		}
		if st, err = enc.EncodeRows(dst, src, 0, m.Rows); err != nil {
			log.Fatal(err)
		}
	}
	ecpu, ewall := best(encode)
	for i, p := range planes {
		if p.RowBytes == 0 {
			copy(dst[i], enc.TensorPlane(i))
		}
	}
	out := make([]float32, m.Elements())
	dcpu, dwall := best(func() {
		if err := codecs.DecodeRows(f, codecs.BF16, m, buf, 0, m.Rows, out); err != nil {
			log.Fatal(err)
		}
	})
	n := float64(m.Elements())
	fmt.Printf("| %s | %s | %.3f | %.3f%% | %.3g | %.3f | %.3f | %.3f | %.3f |\n", name, d, float64(size)*8/n,
		100*st.RelRMSE(), st.MaxAbsErr, n/ecpu/1e9, n/ewall/1e9, n/dcpu/1e9, n/dwall/1e9)
}

// best runs fn -reps times after one warm-up and returns the smallest
// thread CPU time and the smallest wall time, in seconds.
func best(fn func()) (cpu, wall float64) {
	fn()
	cpu, wall = 1e9, 1e9
	for range *reps {
		c0, w0 := threadCPU(), time.Now()
		fn()
		cpu = min(cpu, threadCPU()-c0)
		wall = min(wall, time.Since(w0).Seconds())
	}
	return cpu, wall
}

func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
