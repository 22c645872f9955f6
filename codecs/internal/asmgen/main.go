// Command asmgen writes the AVX-512 kernels of the codecs package:
// codecs/nvfp4_amd64.s (the searching nvfp4 block encoder on float32 rows,
// unweighted and importance-weighted) and codecs/scan_amd64.s (max |x| of a
// run of source elements). Run it with `go generate ./codecs/`.
//
// The nvfp4 kernels process 16 blocks at once with one block per vector
// lane, so every lane performs exactly the float32 operation sequence of the
// scalar reference (nvfp4Block, nvfp4BlockW in nvfp4.go) and the results
// are bit-identical to it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }

func z(i int) string { return fmt.Sprintf("Z%d", i) }
func y(i int) string { return fmt.Sprintf("Y%d", i) }

// Comparison predicates of VCMPPS.
const (
	cmpNEQ = 12 // NEQ_OQ
	cmpLT  = 17 // LT_OQ
	cmpGT  = 30 // GT_OQ
)

func main() {
	dir := flag.String("dir", ".", "directory of the generated files")
	flag.Parse()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*dir, f.name), f.gen(), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// files are the generated files and their generators.
var files = []struct {
	name string
	gen  func() []byte
}{
	{"nvfp4_amd64.s", generateNVFP4},
	{"scan_amd64.s", generateScan},
}

func clone() []byte { return bytes.Clone(out.Bytes()) }

// transpose16 transposes the 16×16 dword matrix in Z0..Z15 (row i in Zi)
// using Z16..Z31 as scratch; afterwards column c is in Z[col[c]].
func transpose16() (col [16]int) {
	for i := range 8 { // interleave dwords of row pairs
		p("VPUNPCKLDQ %s, %s, %s", z(2*i+1), z(2*i), z(16+2*i))
		p("VPUNPCKHDQ %s, %s, %s", z(2*i+1), z(2*i), z(16+2*i+1))
	}
	for q := range 4 { // u[4q+c]: lane L holds column 4L+c of rows 4q..4q+3
		t := 16 + 4*q
		p("VPUNPCKLQDQ %s, %s, %s", z(t+2), z(t), z(4*q))
		p("VPUNPCKHQDQ %s, %s, %s", z(t+2), z(t), z(4*q+1))
		p("VPUNPCKLQDQ %s, %s, %s", z(t+3), z(t+1), z(4*q+2))
		p("VPUNPCKHQDQ %s, %s, %s", z(t+3), z(t+1), z(4*q+3))
	}
	for c := range 4 { // v[c][0..3] in Z16+4c..
		v := 16 + 4*c
		p("VSHUFI32X4 $0x88, %s, %s, %s", z(4+c), z(c), z(v))
		p("VSHUFI32X4 $0xdd, %s, %s, %s", z(4+c), z(c), z(v+1))
		p("VSHUFI32X4 $0x88, %s, %s, %s", z(12+c), z(8+c), z(v+2))
		p("VSHUFI32X4 $0xdd, %s, %s, %s", z(12+c), z(8+c), z(v+3))
	}
	for c := range 4 {
		v := 16 + 4*c
		p("VSHUFI32X4 $0x88, %s, %s, %s", z(v+2), z(v), z(c))
		p("VSHUFI32X4 $0xdd, %s, %s, %s", z(v+2), z(v), z(8+c))
		p("VSHUFI32X4 $0x88, %s, %s, %s", z(v+3), z(v+1), z(4+c))
		p("VSHUFI32X4 $0xdd, %s, %s, %s", z(v+3), z(v+1), z(12+c))
		col[c], col[8+c], col[4+c], col[12+c] = c, 8+c, 4+c, 12+c
	}
	return col
}

func zero(rs ...int) {
	for _, r := range rs {
		p("VPXORD %s, %s, %s", z(r), z(r), z(r))
	}
}
