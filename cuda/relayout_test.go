package cuda

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/dgq"
	"github.com/dgq-dev/dgq/layout"
	api "github.com/dgq-dev/dgq/runtime/backend"
)

// Tests of the resident (planar) layout and of the re-lay at upload
// (planar.go, relayout.kern): the planes the device builds against a host
// re-lay of the same pack bytes, byte for byte, and the device decoders on
// them against codecs.DecodeRows, for every format, both encoder methods,
// random bytes, 3-D nvfp4 stacks with a different scale per expert, and
// chunkings that split rows, matrices and stacks anywhere; and the upload
// time of a real-shape q4 pack.

// hostPlanar re-lays a pack tensor on the host into its resident layout:
// the reference of relayout.kern (the bytes between planes are zero).
func hostPlanar(t *testing.T, f codecs.Format, dt codecs.DType, m codecs.Matrix, enc []byte) []byte {
	t.Helper()
	p, err := planarLayout(f, dt, m)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, p.Size)
	l := p.Layout
	for r := int64(0); r < m.Rows; r++ {
		off := l.RowOffset(r)
		row := enc[off : off+l.RowBytes]
		switch f {
		case codecs.Raw:
			copy(out[p.Off[0]+r*p.Row[0]:], row)
		case codecs.Q8:
			copy(out[p.Off[0]+r*m.K:], row[2:])
			binary.LittleEndian.PutUint32(out[p.Off[1]+4*r:], uint32(binary.LittleEndian.Uint16(row))<<16)
		case codecs.Q4, codecs.Q5, codecs.Q6:
			cb := int64(4 * f.Bits())
			for g := int64(0); g < m.K/32; g++ {
				blk := row[g*(cb+4) : (g+1)*(cb+4)]
				copy(out[p.Off[0]+r*p.Row[0]+g*cb:], blk[4:])
				copy(out[p.Off[1]+r*p.Row[1]+2*g:], blk[0:2])
				copy(out[p.Off[2]+r*p.Row[2]+2*g:], blk[2:4])
			}
		case codecs.NVFP4:
			copy(out[p.Off[0]+r*m.K/2:], row[:m.K/2])
			copy(out[p.Off[1]+r*m.K/16:], row[m.K/2:])
			if r%l.MatRows == 0 {
				copy(out[p.Off[2]+4*(r/l.MatRows):], enc[off-4:off])
			}
		}
	}
	return out
}

// planeRanges are the byte ranges of a resident tensor's planes.
func planeRanges(f codecs.Format, p planar, m codecs.Matrix) [][2]int64 {
	var rs [][2]int64
	for i := range 3 {
		n := m.Rows * p.Row[i]
		if i == 2 && f == codecs.NVFP4 {
			n = 4 * p.Layout.Matrices
		}
		if n > 0 {
			rs = append(rs, [2]int64{p.Off[i], p.Off[i] + n})
		}
	}
	return rs
}

// TestPlanarLayout checks the resident layouts (no GPU): planes aligned, in
// order, not overlapping, within the size, of the sizes their rows give.
func TestPlanarLayout(t *testing.T) {
	for _, f := range []codecs.Format{codecs.Raw, codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4} {
		for _, m := range []codecs.Matrix{{Rows: 1, K: 32}, {Rows: 7, K: 160}, {Rows: 12, K: 64, Mats: 4}, {Rows: 1001, K: 2816}, {Rows: 3, K: 33}} {
			p, err := planarLayout(f, codecs.BF16, m)
			if err != nil {
				if _, lerr := f.Layout(codecs.BF16, m); lerr != nil {
					continue // K not a multiple of the format's group
				}
				t.Fatalf("%s %v: %v", f, m, err)
			}
			var end int64
			for _, r := range planeRanges(f, p, m) {
				if r[0]%planeAlign != 0 || r[0] < end || r[1] > p.Size {
					t.Errorf("%s %v: plane %v (previous ends at %d, size %d)", f, m, r, end, p.Size)
				}
				end = r[1]
			}
			if end != p.Size {
				t.Errorf("%s %v: planes end at %d, size %d", f, m, end, p.Size)
			}
			if f == codecs.NVFP4 && p.MatRows != m.Rows/m.Matrices() {
				t.Errorf("%s %v: %d rows a matrix", f, m, p.MatRows)
			}
		}
	}
}

// TestRelayout uploads pack tensors of every format (encoder output of both
// methods, random bytes) through the re-lay, with the default chunk and with
// chunks of a few rows or less than a row (pinned and pageable staging),
// and checks the resident planes byte for byte against hostPlanar and
// Ops.Dequant bit for bit against codecs.DecodeRows.
func TestRelayout(t *testing.T) {
	d, ops := device(t)
	defer ops.SetUploadChunk(0, true)
	rng := rand.New(rand.NewPCG(61, 62))
	expert := []float64{1e-3, 1, 40, 3e2, 0.05, 7, 1e3, 0.3}
	type fd struct {
		f  codecs.Format
		dt codecs.DType
	}
	fds := []fd{{codecs.Raw, codecs.BF16}, {codecs.Q8, codecs.F32}, {codecs.Q4, codecs.F32}, {codecs.Q5, codecs.F32},
		{codecs.Q6, codecs.BF16}, {codecs.NVFP4, codecs.F32}, {codecs.NVFP4, codecs.BF16}}
	shapes := []codecs.Matrix{{Rows: 1, K: 32}, {Rows: 7, K: 160}, {Rows: 33, K: 2816}, {Rows: 40, K: 64, Mats: 8},
		{Rows: 35, K: 96, Mats: 5}, {Rows: 3, K: 33}}
	chunks := []struct {
		bytes  int64
		pinned bool
		tag    string
	}{{0, true, "default"}, {700, true, "700 B pinned"}, {3 * 1000, false, "3000 B pageable"}, {100, true, "100 B pinned"}}
	for _, c := range chunks {
		if err := ops.SetUploadChunk(c.bytes, c.pinned); err != nil {
			t.Fatal(err)
		}
		for _, x := range fds {
			for _, m := range shapes {
				if _, err := x.f.Layout(x.dt, m); err != nil {
					continue // K not a multiple of the format's group
				}
				encs := map[string][]byte{"random bytes": randomTensor(t, rng, x.f, x.dt, m)}
				if x.f != codecs.Raw && x.dt == codecs.F32 {
					encs["search"] = encodeFormatWith(t, rng, x.f, m, codecs.Search, expert)
					encs["minmax"] = encodeFormatWith(t, rng, x.f, m, codecs.MinMax, expert)
				}
				for what, enc := range encs {
					name := fmt.Sprintf("%s/%s %s %d×%d/%d %s", c.tag, x.f, x.dt, m.Rows, m.K, m.Matrices(), what)
					p, _ := planarLayout(x.f, x.dt, m)
					b := uploadTensor(t, ops, x.f, x.dt, m, enc)
					got := download[byte](t, b, int(p.Size))
					want := hostPlanar(t, x.f, x.dt, m, enc)
					for _, r := range planeRanges(x.f, p, m) {
						for i := r[0]; i < r[1]; i++ {
							if got[i] != want[i] {
								t.Errorf("%s: resident byte %d (plane %v) = %#02x, want %#02x", name, i, r, got[i], want[i])
								break
							}
						}
					}
					ob, err := d.Alloc(4 * m.Elements())
					if err != nil {
						t.Fatal(err)
					}
					if err := ops.Dequant(ob.Ptr(), b.Ptr(), x.f, x.dt, m); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					dec := make([]float32, m.Elements())
					if err := codecs.DecodeRows(x.f, x.dt, m, enc, 0, m.Rows, dec); err != nil {
						t.Fatal(err)
					}
					compareBits(t, name, download[float32](t, ob, int(m.Elements())), dec, false)
					ob.Free()
					b.Free()
				}
			}
		}
		t.Logf("chunk %s: pinned staging %v", c.tag, ops.UploadPinned())
	}
}

// realShapePlan is the plan of the real-shape checkpoint (bf16 source) under
// profile: every tensor of the pack with its format, dtype and shape.
func realShapePlan(t testing.TB, profile string) *layout.Plan {
	t.Helper()
	cfg, err := layout.ParseConfig(dgq.SynthConfig(30))
	if err != nil {
		t.Fatal(err)
	}
	ts := layout.ExpectedText(cfg)
	for i := range ts {
		ts[i].DType = codecs.BF16
	}
	pol, err := layout.NewPolicy(profile, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := layout.MakePlan(pol, ts)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestRealShapePlan logs what the real-shape q4 pack holds (no GPU): the
// tensors TestUploadRealShape uploads.
func TestRealShapePlan(t *testing.T) {
	plan := realShapePlan(t, "q4")
	bytes := map[codecs.Format]int64{}
	var total int64
	for _, e := range plan.Entries {
		bytes[e.Format] += e.Size
		total += e.Size
	}
	t.Logf("real-shape q4 pack: %d tensors, %.2f GB (%v)", len(plan.Entries), float64(total)/1e9, bytes)
	if total < 15e9 {
		t.Errorf("real-shape q4 pack of %d bytes", total)
	}
}

// randomFill fills b with random bytes, in parallel.
func randomFill(b []byte, seed uint64) {
	const chunk = 16 << 20
	var wg sync.WaitGroup
	for s := 0; s < len(b); s += chunk {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(s)))
			e := min(s+chunk, len(b))
			i := s
			for ; i+8 <= e; i += 8 {
				binary.LittleEndian.PutUint64(b[i:], r.Uint64())
			}
			for ; i < e; i++ {
				b[i] = byte(r.Uint32())
			}
		}()
	}
	wg.Wait()
}

// TestUploadRealShape times the upload of every weight of the real-shape q4
// pack (30 layers, ~19 GB; random bytes of each tensor's size, one buffer per
// distinct geometry) through the backend's UploadWeight — allocation, copy
// to the device and re-lay included, synchronized at the end — with pinned
// staging (the default) and pageable copies. The budget is 2 s on
// the H200 for the default path.
func TestUploadRealShape(t *testing.T) {
	d, _ := device(t)
	if testing.Short() {
		t.Skip("-short: uploads 19 GB")
	}
	plan := realShapePlan(t, "q4")
	host := map[string][]byte{}
	var total int64
	for i, e := range plan.Entries {
		key := fmt.Sprint(e.Format, e.DType, e.Shape)
		if host[key] == nil {
			host[key] = make([]byte, e.Size)
			randomFill(host[key], uint64(i))
		}
		total += e.Size
	}
	for _, pinned := range []bool{true, false} {
		b := Backend(d)
		b.(*backend).ops.SetUploadChunk(0, pinned)
		ws := make([]api.Weight, 0, len(plan.Entries))
		start := time.Now()
		for _, e := range plan.Entries {
			w, err := b.UploadWeight(api.TensorData{Name: e.Name, Format: e.Format, DType: e.DType, Shape: e.Shape,
				Bytes: host[fmt.Sprint(e.Format, e.DType, e.Shape)]})
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		mode := "pinned"
		if !b.(*backend).ops.UploadPinned() {
			mode = "pageable"
		}
		t.Logf("upload of the real-shape q4 pack (%d tensors, %.2f GB), %s staging (asked pinned %v): %.3f s, %.1f GB/s",
			len(ws), float64(total)/1e9, mode, pinned, el.Seconds(), float64(total)/el.Seconds()/1e9)
		if pinned && strings.Contains(d.Name(), "H200") && el > 2*time.Second {
			t.Errorf("upload of the real-shape q4 pack took %.3f s (budget 2 s)", el.Seconds())
		}
		for _, w := range ws {
			w.Free()
		}
		b.Close()
	}
}
