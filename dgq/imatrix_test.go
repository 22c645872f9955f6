package dgq

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/hfcache"
)

// imTensor is one tensor of a test imatrix file.
type imTensor struct {
	name  string
	dtype string
	shape []int
	vals  []float32
}

// writeST writes tensors as a safetensors file (keys sorted, F32 data
// little-endian; other dtypes get 4 bytes a value too, for refusals).
func writeST(t testing.TB, path string, ts []imTensor, meta map[string]string) {
	t.Helper()
	slices.SortFunc(ts, func(a, b imTensor) int { return bytesCompare(a.name, b.name) })
	type entry struct {
		DType   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	header := map[string]any{}
	if meta != nil {
		header["__metadata__"] = meta
	}
	var data []byte
	for _, x := range ts {
		start := int64(len(data))
		for _, v := range x.vals {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		dt := x.dtype
		if dt == "" {
			dt = "F32"
		}
		header[x.name] = entry{dt, x.shape, [2]int64{start, int64(len(data))}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func bytesCompare(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) }

// imatrixFor writes an imatrix for every tensor profile quantizes in src:
// in_sum2 from sum(expert, column), counts from count(expert).
func imatrixFor(t testing.TB, src, profile string, sum func(e, k int) float32, count func(e int) float32) string {
	t.Helper()
	res, err := Quantize(context.Background(), QuantizeOptions{Source: src, Profile: profile, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var ts []imTensor
	for _, e := range res.Plan.Entries {
		if !e.Format.Quantized() {
			continue
		}
		m, _ := codecs.FlattenShape(e.Shape)
		E, K := int(m.Matrices()), int(m.K)
		s := make([]float32, E*K)
		c := make([]float32, E)
		for ex := range E {
			c[ex] = count(ex)
			for k := range K {
				s[ex*K+k] = sum(ex, k)
			}
		}
		sumShape, cShape := []int{K}, []int{1}
		if len(e.Shape) == 3 {
			sumShape, cShape = []int{E, K}, []int{E}
		}
		ts = append(ts, imTensor{name: e.Name + ".in_sum2", shape: sumShape, vals: s}, imTensor{name: e.Name + ".counts", shape: cShape, vals: c})
	}
	path := filepath.Join(t.TempDir(), "x.imatrix.safetensors")
	writeST(t, path, ts, map[string]string{"dgq_version": "test", "text_sha256": "ab"})
	return path
}

// Uniform importance gives exactly the unweighted search's bytes in every
// format (q4/q6 affine, q8, nvfp4), the manifest records the file's digest,
// and the report's weighted error equals the plain one (up to the order
// of summation).
func TestQuantizeImatrixUniformIsPlain(t *testing.T) {
	src := tinySnapshot(t)
	for _, profile := range []string{"q4", "q6", "nvfp4"} {
		t.Run(profile, func(t *testing.T) {
			im := imatrixFor(t, src, profile, func(int, int) float32 { return 3 }, func(int) float32 { return 7 })
			plain, _ := quantize(t, src, profile)
			out := filepath.Join(t.TempDir(), "w.dgq")
			res, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: profile, Imatrix: im})
			if err != nil {
				t.Fatal(err)
			}
			if a, b := fileSHA(t, filepath.Join(plain, BlobName)), fileSHA(t, filepath.Join(out, BlobName)); a != b {
				t.Errorf("uniform imatrix changed the blob")
			}
			if got, want := res.Manifest.DGQ.Imatrix, (&ImatrixRef{SHA256: sha256File(t, im), TextSHA256: "ab"}); got == nil || *got != *want {
				t.Errorf("manifest imatrix %+v, want %+v", got, want)
			}
			p, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Manifest.DGQ.Imatrix == nil || p.Manifest.DGQ.Imatrix.SHA256 != res.Manifest.DGQ.Imatrix.SHA256 {
				t.Errorf("reopened manifest imatrix %+v", p.Manifest.DGQ.Imatrix)
			}
			n := 0
			for _, tr := range res.Report.Tensors {
				if tr.Format == codecs.Raw {
					if tr.WeightedRelRMSE != nil {
						t.Errorf("raw %s has a weighted error", tr.Name)
					}
					continue
				}
				n++
				// the same float64 terms, summed in another order where a
				// kernel sums per block: equal up to summation rounding,
				// at most params·2⁻⁵³ relative
				if tr.WeightedRelRMSE == nil || math.Abs(*tr.WeightedRelRMSE-tr.RelRMSE) > float64(tr.Params)*0x1p-53*tr.RelRMSE {
					t.Errorf("%s: weighted %v, plain %g", tr.Name, derefF(tr.WeightedRelRMSE), tr.RelRMSE)
				}
			}
			if n == 0 {
				t.Fatal("nothing quantized")
			}
		})
	}
}

func sha256File(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	im, err := parseImatrix(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return im.SHA256
}

// With heavy-tailed importance the pack's weighted error, recomputed from
// the decoded pack with Imatrix.weights, is what the report says, and it is
// below the weighted error of the unweighted search's pack for the
// searched classes taken together; experts with no rows are counted.
func TestQuantizeImatrixWeighted(t *testing.T) {
	src := tinySnapshot(t)
	rng := rand.New(rand.NewPCG(3, 4))
	cols := map[[2]int]float32{}
	sum := func(e, k int) float32 {
		key := [2]int{e, k}
		if v, ok := cols[key]; ok {
			return v
		}
		v := float32(math.Exp(1.5 * rng.NormFloat64()))
		cols[key] = v
		return v
	}
	count := func(e int) float32 { return float32(map[bool]int{true: 0, false: 10}[e == 1]) } // expert 1 never reached
	for _, profile := range []string{"q4", "nvfp4"} {
		t.Run(profile, func(t *testing.T) {
			path := imatrixFor(t, src, profile, sum, count)
			im, err := ReadImatrix(path)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := quantize(t, src, profile)
			out := filepath.Join(t.TempDir(), "w.dgq")
			res, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: profile, Imatrix: path})
			if err != nil {
				t.Fatal(err)
			}
			if rep, err := Audit(context.Background(), out, AuditOptions{}); err != nil || !rep.OK {
				t.Fatalf("audit: %v %v", err, rep)
			}
			byName := map[string]TensorReport{}
			for _, tr := range res.Report.Tensors {
				byName[tr.Name] = tr
			}
			var wPlain, wImp float64
			for _, tr := range res.Report.Tensors {
				if tr.Format == codecs.Raw {
					continue
				}
				shape := tensorShape(t, out, tr.Name)
				m, _ := codecs.FlattenShape(shape)
				w, unreached := im.weights(tr.Name, m)
				wantUnreached := 0
				if len(shape) == 3 {
					wantUnreached = 1
				}
				if tr.ImatrixUnreached != wantUnreached || unreached != wantUnreached {
					t.Errorf("%s: unreached %d (weights %d), want %d", tr.Name, tr.ImatrixUnreached, unreached, wantUnreached)
				}
				eI, rI := weightedErr(t, src, out, tr.Name, w)
				eP, _ := weightedErr(t, src, plain, tr.Name, w)
				if rel := math.Sqrt(eI / rI); tr.WeightedRelRMSE == nil || math.Abs(rel-*tr.WeightedRelRMSE) > 1e-9*rel {
					t.Errorf("%s: report weighted %v, decoded %g", tr.Name, tr.WeightedRelRMSE, rel)
				}
				wPlain += eP
				wImp += eI
			}
			t.Logf("%s: weighted error with the imatrix %.4g, without %.4g (%.1f%% lower)", profile, wImp, wPlain, 100*(1-wImp/wPlain))
			if !(wImp < 0.9*wPlain) {
				t.Errorf("weighted error %g with the imatrix, %g without: not 10%% lower", wImp, wPlain)
			}
		})
	}
}

func tensorShape(t testing.TB, pack, name string) []int64 {
	t.Helper()
	p, err := Open(pack)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tn, ok := p.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	return tn.Shape
}

// weightedErr decodes tensor name of pack and returns Σw·err² and Σw·src²
// against the snapshot src, w per column of each matrix.
func weightedErr(t testing.TB, src, pack, name string, w []float32) (float64, float64) {
	t.Helper()
	p, err := Open(pack)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tn, _ := p.Tensor(name)
	m, _ := codecs.FlattenShape(tn.Shape)
	deq := make([]float32, m.Elements())
	enc, _ := p.TensorBytes(name)
	if err := codecs.DecodeRows(tn.Format, tn.DType, m, enc, 0, m.Rows, deq); err != nil {
		t.Fatal(err)
	}
	snap, err := hfcache.OpenSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var ref []float32
	for _, r := range snap.Tensors() {
		if r.Name == name {
			ref = make([]float32, m.Elements())
			if err := codecs.ToFloat32(tn.DType, r.Bytes(), ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	rowsPer := m.Rows / m.Matrices()
	var e2, r2 float64
	for i := range ref {
		row, k := int64(i)/m.K, int64(i)%m.K
		wk := float64(w[row/rowsPer*m.K+k])
		d := float64(deq[i]) - float64(ref[i])
		e2 += wk * d * d
		r2 += wk * float64(ref[i]) * float64(ref[i])
	}
	return e2, r2
}

// Every unusable --imatrix is refused before the output exists, with an
// error that matches its sentinel.
func TestImatrixRefusals(t *testing.T) {
	src := tinySnapshot(t)
	good := imatrixFor(t, src, "q4", func(int, int) float32 { return 1 }, func(int) float32 { return 1 })
	goodBytes, _ := os.ReadFile(good)
	gi, err := parseImatrix(good, goodBytes)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range gi.stats {
		names = append(names, n)
	}
	slices.Sort(names)
	var expertName string
	for _, n := range names {
		if gi.stats[n].experts > 1 {
			expertName = n
			break
		}
	}
	dir := t.TempDir()
	write := func(name string, ts []imTensor) string {
		p := filepath.Join(dir, name)
		writeST(t, p, ts, nil)
		return p
	}
	// all of the good file's tensors but one changed by edit
	variant := func(name string, edit func([]imTensor) []imTensor) string {
		var ts []imTensor
		for _, n := range names {
			s := gi.stats[n]
			sumShape, cShape := []int{int(s.in)}, []int{1}
			if s.experts > 1 {
				sumShape, cShape = []int{int(s.experts), int(s.in)}, []int{int(s.experts)}
			}
			ts = append(ts, imTensor{name: n + ".in_sum2", shape: sumShape, vals: slices.Clone(s.sum2)}, imTensor{name: n + ".counts", shape: cShape, vals: slices.Clone(s.counts)})
		}
		return write(name, edit(ts))
	}
	notST := filepath.Join(dir, "text.safetensors")
	os.WriteFile(notST, []byte("hello, this is not a safetensors file at all"), 0o644)
	cases := []struct {
		name    string
		path    string
		encoder codecs.Method
		want    error
	}{
		{"missing file", filepath.Join(dir, "nope.imatrix.safetensors"), codecs.Search, ErrImatrix},
		{"a folder", dir, codecs.Search, ErrImatrix},
		{"not safetensors", notST, codecs.Search, ErrImatrix},
		{"minmax encoder", good, codecs.MinMax, ErrUsage},
		{"a tensor missing", variant("missing.st", func(ts []imTensor) []imTensor {
			return slices.DeleteFunc(ts, func(x imTensor) bool { return x.name == expertName+".in_sum2" || x.name == expertName+".counts" })
		}), codecs.Search, ErrImatrix},
		{"wrong column count", variant("cols.st", func(ts []imTensor) []imTensor {
			for i := range ts {
				if ts[i].name == names[0]+".in_sum2" {
					n := len(ts[i].shape) - 1
					ts[i].shape[n] *= 2
					ts[i].vals = append(ts[i].vals, ts[i].vals...)
				}
			}
			return ts
		}), codecs.Search, ErrImatrix},
		{"negative value", variant("neg.st", func(ts []imTensor) []imTensor { ts[0].vals[0] = -1; return ts }), codecs.Search, ErrImatrix},
		{"NaN", variant("nan.st", func(ts []imTensor) []imTensor { ts[1].vals[0] = float32(math.NaN()); return ts }), codecs.Search, ErrImatrix},
		{"counts without sums", variant("orphan.st", func(ts []imTensor) []imTensor {
			return append(ts, imTensor{name: "extra.counts", shape: []int{1}, vals: []float32{1}})
		}), codecs.Search, ErrImatrix},
		{"unknown tensor", variant("unknown.st", func(ts []imTensor) []imTensor {
			return append(ts, imTensor{name: "extra.weight", shape: []int{1}, vals: []float32{1}})
		}), codecs.Search, ErrImatrix},
		{"counts of another shape", variant("cshape.st", func(ts []imTensor) []imTensor {
			for i := range ts {
				if ts[i].name == expertName+".counts" {
					ts[i].shape, ts[i].vals = []int{1}, ts[i].vals[:1]
				}
			}
			return ts
		}), codecs.Search, ErrImatrix},
		{"F16 values", variant("f16.st", func(ts []imTensor) []imTensor {
			ts[0].dtype, ts[0].vals = "F16", ts[0].vals[:(len(ts[0].vals)+1)/2]
			return ts
		}), codecs.Search, ErrImatrix},
		{"empty", write("empty.st", nil), codecs.Search, ErrImatrix},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.dgq")
			_, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q4", Imatrix: c.path, Encoder: c.encoder})
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			t.Log(err)
			assertNoOutput(t, out)
		})
	}
}

// The parser never panics and accepts only what it can use.
func FuzzParseImatrix(f *testing.F) {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed.st")
	writeST(f, p, []imTensor{{name: "a.in_sum2", shape: []int{2, 3}, vals: []float32{1, 2, 3, 4, 5, 6}}, {name: "a.counts", shape: []int{2}, vals: []float32{1, 0}}}, map[string]string{"k": "v"})
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		im, err := parseImatrix("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrImatrix) {
				t.Fatalf("error %v does not match ErrImatrix", err)
			}
			return
		}
		for name, s := range im.stats {
			if int64(len(s.sum2)) != s.experts*s.in || int64(len(s.counts)) != s.experts {
				t.Fatalf("%s: %d sums, %d counts for %d×%d", name, len(s.sum2), len(s.counts), s.experts, s.in)
			}
			w, _ := im.weights(name, codecs.Matrix{Rows: s.experts, K: s.in, Mats: s.experts})
			for _, v := range w {
				if !(v > 0) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: weight %v", name, v)
				}
			}
		}
	})
}

func derefF(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
