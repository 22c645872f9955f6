// Command codecbench measures the codecs encoders on the seeded 1408×2816
// bf16 test matrices (Gaussian and Student-t3, std 0.02) and prints the
// markdown table of docs/codecs.md: for q4, q5, q6, q8 and nvfp4 the
// searching encoder (Method Search) against the original engine's min/max
// encoder (Method MinMax, the baseline): relative RMSE, max abs error,
// encode and decode speed. Plain ModelOpt nvfp4 (fake quantization, no
// packing) is printed as a second reference for nvfp4.
//
//	go run ./codecs/internal/codecbench [-rows 1408 -k 2816 -reps 7]
//
// Everything runs on one goroutine locked to one OS thread with
// GOMAXPROCS=1. Speeds are elements per second of thread CPU time (best of
// -reps), which stays meaningful on a shared machine, and of wall-clock
// time for the same best run ("cpu / wall"). Encode includes reading bf16,
// the amax scan where the method needs one and the statistics; it writes
// into a preallocated buffer. Decode is the scalar reference decoder.
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

var formats = []codecs.Format{codecs.Q4, codecs.Q5, codecs.Q6, codecs.Q8, codecs.NVFP4}

func main() {
	flag.Parse()
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	m := codecs.Matrix{Rows: *rows, K: *k}
	n := float64(m.Elements())
	fmt.Println("| format | dist | bpw | rel RMSE search | rel RMSE min/max | search gain | max abs err search | max abs err min/max | encode Gelem/s search (cpu / wall) | encode Gelem/s min/max (cpu / wall) | decode Gelem/s (cpu / wall) |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, d := range testmat.Dists {
		src := testmat.BF16(d, int(m.Elements()), 1)
		for _, f := range formats {
			s := measure(f, codecs.Search, m, src)
			b := measure(f, codecs.MinMax, m, src)
			fmt.Printf("| %s | %s | %.3f | %.3f%% | %.3f%% | %.1f%% | %.3g | %.3g | %s | %s | %s |\n",
				f, d, s.bpw, 100*s.st.RelRMSE(), 100*b.st.RelRMSE(), 100*(1-s.st.RelRMSE()/b.st.RelRMSE()),
				s.st.MaxAbsErr, b.st.MaxAbsErr, speed(n, s.enc), speed(n, b.enc), speed(n, s.dec))
		}
		x := make([]float32, m.Elements())
		if err := codecs.ToFloat32(codecs.BF16, src, x); err != nil {
			log.Fatal(err)
		}
		out := make([]float32, len(x))
		var st codecs.Stats
		t := best(func() { st = baseline.ModelOpt(x, out) })
		fmt.Printf("| nvfp4 plain ModelOpt (fake-quant) | %s | 4.500 | %.3f%% | – | – | %.3g | – | %s | – | – |\n",
			d, 100*st.RelRMSE(), st.MaxAbsErr, speed(n, t))
	}
}

type timing struct{ cpu, wall float64 }

type result struct {
	bpw      float64
	st       codecs.Stats
	enc, dec timing
}

// measure encodes and decodes the matrix in format f with method.
func measure(f codecs.Format, method codecs.Method, m codecs.Matrix, src []byte) result {
	enc, err := codecs.NewEncoder(f, codecs.BF16, m, method)
	if err != nil {
		log.Fatal(err)
	}
	l := enc.Layout()
	buf := make([]byte, l.Size())
	per := int64(len(src)) / l.Matrices
	var r result
	r.enc = best(func() {
		if enc.NeedsScan() {
			for mat := range l.Matrices {
				amax, err := enc.ScanRows(src[mat*per : (mat+1)*per])
				if err != nil {
					log.Fatal(err)
				}
				enc.SetAmax(mat, amax)
			}
		}
		if r.st, err = enc.EncodeRows(buf, src, 0, m.Rows); err != nil {
			log.Fatal(err)
		}
	})
	out := make([]float32, m.Elements())
	r.dec = best(func() {
		if err := codecs.DecodeRows(f, codecs.BF16, m, buf, 0, m.Rows, out); err != nil {
			log.Fatal(err)
		}
	})
	r.bpw = float64(l.Size()) * 8 / float64(m.Elements())
	return r
}

func speed(n float64, t timing) string {
	return fmt.Sprintf("%.3f / %.3f", n/t.cpu/1e9, n/t.wall/1e9)
}

// best runs fn -reps times after one warm-up and returns the smallest
// thread CPU time and the smallest wall time, in seconds.
func best(fn func()) timing {
	fn()
	t := timing{cpu: 1e9, wall: 1e9}
	for range *reps {
		c0, w0 := threadCPU(), time.Now()
		fn()
		t.cpu = min(t.cpu, threadCPU()-c0)
		t.wall = min(t.wall, time.Since(w0).Seconds())
	}
	return t
}

func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
