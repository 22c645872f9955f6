package dgq

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgq-dev/dgq/codecs"
	"github.com/dgq-dev/dgq/hfcache"
	"github.com/dgq-dev/dgq/layout"
)

var allProfiles = []string{"bf16", "q4", "q5", "q6", "nvfp4", "nvfp4x"}

func quantize(t testing.TB, src, profile string, sets ...string) (string, *QuantizeResult) {
	t.Helper()
	out := filepath.Join(t.TempDir(), profile+".dgq")
	res, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: profile, Sets: sets})
	if err != nil {
		t.Fatalf("quantize %s: %v", profile, err)
	}
	return out, res
}

// Every profile quantizes the tiny fixture and the held-out wide checkpoint,
// and the pack audits clean and opens.
func TestQuantizeEveryProfileAuditsClean(t *testing.T) {
	sources := map[string]string{"tiny": tinySnapshot(t), "wide": wideSnapshot(t)}
	for name, src := range sources {
		for _, profile := range allProfiles {
			t.Run(name+"/"+profile, func(t *testing.T) {
				out, res := quantize(t, src, profile)
				rep, err := Audit(context.Background(), out, AuditOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !rep.OK {
					t.Fatalf("audit findings: %v", rep.Findings)
				}
				p, err := Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				hasNVFP4 := false
				for _, tn := range p.Manifest.Tensors {
					hasNVFP4 = hasNVFP4 || tn.Format == codecs.NVFP4
				}
				wantVersion := map[string]int{"bf16": VersionDGQOnly, "q4": VersionAffine, "q5": VersionDGQOnly,
					"q6": VersionAffine, "nvfp4": VersionNVFP4, "nvfp4x": VersionCustom}[profile]
				if p.Manifest.Version != wantVersion {
					t.Errorf("version %d, want %d (nvfp4 present: %v)", p.Manifest.Version, wantVersion, hasNVFP4)
				}
				if len(p.Manifest.Tensors) != len(res.Plan.Entries) {
					t.Errorf("%d tensors written, plan has %d", len(p.Manifest.Tensors), len(res.Plan.Entries))
				}
				for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
					if _, err := os.Stat(filepath.Join(out, f)); err != nil {
						t.Errorf("side file %s not copied: %v", f, err)
					}
				}
			})
		}
	}
}

// In the bf16 profile every tensor is raw and byte-identical to the source;
// in q4 the raw tensors are too, and the experts are q4.
func TestRawTensorsAreSourceBytes(t *testing.T) {
	src := tinySnapshot(t)
	snap, err := hfcache.OpenSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for _, profile := range []string{"bf16", "q4"} {
		out, _ := quantize(t, src, profile)
		p, err := Open(out)
		if err != nil {
			t.Fatal(err)
		}
		raw := 0
		for _, ref := range snap.Tensors() {
			tn, ok := p.Tensor(ref.Name)
			if !ok {
				t.Fatalf("%s: tensor %s missing from pack", profile, ref.Name)
			}
			if profile == "bf16" && tn.Format != codecs.Raw {
				t.Errorf("bf16 profile stored %s as %s", ref.Name, tn.Format)
			}
			if profile == "q4" && tn.Class == layout.Experts && tn.Format != codecs.Q4 {
				t.Errorf("q4 profile stored expert %s as %s", ref.Name, tn.Format)
			}
			if tn.Format != codecs.Raw {
				continue
			}
			raw++
			got, _ := p.TensorBytes(ref.Name)
			if !bytes.Equal(got, ref.Bytes()) {
				t.Errorf("%s: raw tensor %s differs from the source bytes", profile, ref.Name)
			}
		}
		if raw == 0 {
			t.Errorf("%s: no raw tensors checked", profile)
		}
		p.Close()
	}
}

// Two runs give identical blobs, also when the shards present the tensors in
// another order, in another number of shards, at other offsets.
func TestQuantizeDeterministic(t *testing.T) {
	src := tinySnapshot(t)
	for _, profile := range []string{"q4", "nvfp4"} {
		a, _ := quantize(t, src, profile)
		b, _ := quantize(t, src, profile)
		c, _ := quantize(t, reshard(t, src, 3, 11), profile)
		d, _ := quantize(t, reshard(t, src, 1, 12), profile)
		want := fileSHA(t, filepath.Join(a, BlobName))
		for _, other := range []string{b, c, d} {
			if got := fileSHA(t, filepath.Join(other, BlobName)); got != want {
				t.Errorf("%s: blob digest %s differs from %s", profile, got, want)
			}
		}
		ma, _ := ReadManifest(a)
		mc, _ := ReadManifest(c)
		ma.SourceModel, mc.SourceModel = "", ""
		ja, _ := ma.Marshal()
		jc, _ := mc.Marshal()
		if !bytes.Equal(ja, jc) {
			t.Errorf("%s: manifests differ between shard orders", profile)
		}
	}
}

// Encoding with one worker equals encoding with many.
func TestQuantizeWorkersDoNotChangeBytes(t *testing.T) {
	src := wideSnapshot(t)
	var digests []string
	for _, w := range []int{1, 3} {
		out := filepath.Join(t.TempDir(), "p")
		if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q4", Workers: w}); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, fileSHA(t, filepath.Join(out, BlobName)))
	}
	if digests[0] != digests[1] {
		t.Fatal("blob depends on the number of workers")
	}
}

// Illegal policies and shapes fail before the output directory exists, with
// an error naming the problem (and the tensor where one is at fault).
func TestRefusalsHappenBeforeOutput(t *testing.T) {
	tiny := tinySnapshot(t)
	small := synthSnapshot(t, smallConfig, 3)
	cases := []struct {
		name    string
		src     string
		profile string
		sets    []string
		target  error
		mention string
	}{
		{"locked embed", tiny, "q4", []string{"embed=q4"}, layout.ErrLocked, "embed"},
		{"locked router", tiny, "q4", []string{"router=q8"}, layout.ErrLocked, "router"},
		{"locked norm", tiny, "q4", []string{"norm=q8"}, layout.ErrLocked, "norm"},
		{"unknown target", tiny, "q4", []string{"mlp=q4"}, layout.ErrTarget, "mlp"},
		{"unknown format", tiny, "q4", []string{"attn=q3"}, codecs.ErrUnknownFormat, "q3"},
		{"unknown profile", tiny, "q7", nil, layout.ErrProfile, "q7"},
		{"dims q4 on K=16", small, "q4", nil, layout.ErrDims, "experts.down_proj"},
		{"dims --set experts=q4 on K=16", small, "bf16", []string{"experts=q4"}, layout.ErrDims, "down_proj"},
		{"missing source", filepath.Join(tiny, "nope"), "q4", nil, hfcache.ErrMissingFile, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.dgq")
			_, err := Quantize(context.Background(), QuantizeOptions{Source: c.src, Out: out, Profile: c.profile, Sets: c.sets})
			if err == nil {
				t.Fatal("quantize succeeded")
			}
			if !errors.Is(err, c.target) {
				t.Errorf("error %v is not %v", err, c.target)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %q", err, c.mention)
			}
			assertNoOutput(t, out)
		})
	}
}

// The two expert stacks may be stored in different formats: --set
// experts.down=q8 stores every down_proj in q8 and every gate_up_proj in the
// profile's q4, in a dgq-only pack that audits clean (deep) and records why
// the engine cannot run it.
func TestSplitExpertFormats(t *testing.T) {
	for _, c := range []struct {
		sets           []string
		gateUp, down   codecs.Format
		profile, dgqOK string
	}{
		{[]string{"experts.down=q8"}, codecs.Q4, codecs.Q8, "q4", "experts"},
		{[]string{"experts.gate_up=q6"}, codecs.Q6, codecs.Q4, "q4", "one kind"},
		{[]string{"EXPERTS.DOWN=Q8,attn=bf16"}, codecs.Q4, codecs.Q8, "Q4", "experts"},
	} {
		t.Run(strings.Join(c.sets, " "), func(t *testing.T) {
			out, res := quantize(t, tinySnapshot(t), c.profile, c.sets...)
			var gateUps, downs int
			for _, tn := range res.Manifest.Tensors {
				switch {
				case strings.HasSuffix(tn.Name, "experts.gate_up_proj"):
					gateUps++
					if tn.Format != c.gateUp {
						t.Errorf("%s stored as %s, want %s", tn.Name, tn.Format, c.gateUp)
					}
				case strings.HasSuffix(tn.Name, "experts.down_proj"):
					downs++
					if tn.Format != c.down {
						t.Errorf("%s stored as %s, want %s", tn.Name, tn.Format, c.down)
					}
				}
			}
			if gateUps == 0 || gateUps != downs {
				t.Fatalf("%d gate_up and %d down tensors", gateUps, downs)
			}
			if res.Manifest.Version != VersionDGQOnly || !strings.Contains(res.Manifest.DGQ.DGQOnly, c.dgqOK) {
				t.Errorf("version %d, dgq_only %q", res.Manifest.Version, res.Manifest.DGQ.DGQOnly)
			}
			rep, err := Audit(context.Background(), out, AuditOptions{Deep: true})
			if err != nil || !rep.OK {
				t.Fatalf("audit: %v %v", err, rep)
			}
			// The same manifest claiming a version the engine runs is refused.
			m := *res.Manifest
			m.Version, m.DGQ.DGQOnly = VersionCustom, ""
			found := false
			for _, f := range Validate(&m, -1) {
				found = found || (f.Kind == KindVersion && strings.Contains(f.Message, "expert stacks differ"))
			}
			if !found {
				t.Errorf("version %d with split expert stacks: findings %v", m.Version, Validate(&m, -1))
			}
		})
	}
}

// The small synthetic config (expert FF 16) still quantizes where the shapes
// allow it: nvfp4 needs K % 16 only.
func TestSyntheticOtherShapesQuantize(t *testing.T) {
	src := synthSnapshot(t, smallConfig, 5)
	out, _ := quantize(t, src, "nvfp4")
	rep, err := Audit(context.Background(), out, AuditOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("audit: %v %v", err, rep)
	}
}

// setBF16 overwrites element i of a named tensor of a plain snapshot.
func setBF16(t *testing.T, dir, name string, i int, bits uint16) {
	t.Helper()
	snap, err := hfcache.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	var shard string
	var off int64
	for _, r := range snap.Tensors() {
		if r.Name == name {
			shard, off = r.Shard.Name, r.Offset
		}
	}
	snap.Close()
	if shard == "" {
		t.Fatalf("no tensor %s", name)
	}
	path := filepath.Join(dir, shard)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(b[off+int64(2*i):], bits)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNonFiniteSourceNamesTensor(t *testing.T) {
	for _, c := range []struct{ tensor, profile string }{
		{"model.decoder.layers.1.input_layernorm.weight", "q4"},    // raw path
		{"model.decoder.layers.2.experts.gate_up_proj", "q4"},      // affine encoder
		{"model.decoder.layers.0.experts.down_proj", "nvfp4"},      // nvfp4 scan
		{"model.decoder.self_conditioning.gate_proj.weight", "q4"}, // q8
	} {
		for _, bits := range []uint16{0x7FC0, 0xFF80} { // NaN, -Inf
			src := tinySnapshot(t)
			setBF16(t, src, c.tensor, 5, bits)
			out := filepath.Join(t.TempDir(), "out")
			_, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: c.profile})
			if err == nil {
				t.Fatalf("%s: non-finite value accepted", c.tensor)
			}
			if !errors.Is(err, codecs.ErrNonFinite) || !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), c.tensor) {
				t.Errorf("%s: error %v should be ErrNonFinite and name the tensor", c.tensor, err)
			}
			assertNoOutput(t, out)
		}
	}
}

func TestExistingOutput(t *testing.T) {
	src := tinySnapshot(t)
	out, _ := quantize(t, src, "q4")
	before := fileSHA(t, filepath.Join(out, BlobName))
	_, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q6"})
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("existing output: %v", err)
	}
	if fileSHA(t, filepath.Join(out, BlobName)) != before {
		t.Fatal("refused run altered the existing pack")
	}
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q6", Force: true}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(out)
	if err != nil || m.Profile != "q6" {
		t.Fatalf("forced replace: %v %v", m, err)
	}
	// --force never replaces something that is not a pack.
	notPack := t.TempDir()
	os.WriteFile(filepath.Join(notPack, "precious.txt"), []byte("x"), 0o644)
	_, err = Quantize(context.Background(), QuantizeOptions{Source: src, Out: notPack, Profile: "q4", Force: true})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("non-pack directory replaced: %v", err)
	}
	if _, err := os.Stat(filepath.Join(notPack, "precious.txt")); err != nil {
		t.Fatal("non-pack directory content lost")
	}
	// The output may not be inside the source snapshot.
	_, err = Quantize(context.Background(), QuantizeOptions{Source: src, Out: filepath.Join(src, "pack"), Profile: "q4"})
	if !errors.Is(err, ErrUsage) {
		t.Fatalf("output inside the source: %v", err)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	src := tinySnapshot(t)
	out := filepath.Join(t.TempDir(), "out")
	res, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "q4", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	assertNoOutput(t, out)
	if res.Manifest != nil || len(res.Summary) == 0 {
		t.Fatalf("dry run result %+v", res)
	}
	var experts *layout.ClassSummary
	for i := range res.Summary {
		if res.Summary[i].Class == layout.Experts {
			experts = &res.Summary[i]
		}
	}
	// q4 g32 with fp16 scale+bias: 4 + 32/32 = 5 bits per weight (plus plane padding).
	if experts == nil || experts.BitsPerWeight < 5 || experts.BitsPerWeight > 5.1 {
		t.Fatalf("experts summary %+v", experts)
	}
	_, err = Quantize(context.Background(), QuantizeOptions{Source: src, Profile: "q4", DryRun: true, ReportPath: filepath.Join(t.TempDir(), "r.json")})
	if !errors.Is(err, ErrUsage) {
		t.Fatalf("--report with --dry-run: %v", err)
	}
}

// The report's rel_rmse equals an independent decode of the pack compared
// with the source.
func TestReportMatchesDecodedPack(t *testing.T) {
	src := tinySnapshot(t)
	out := filepath.Join(t.TempDir(), "p")
	rp := filepath.Join(t.TempDir(), "report.json")
	if _, err := Quantize(context.Background(), QuantizeOptions{Source: src, Out: out, Profile: "nvfp4x", ReportPath: rp}); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Tensors []struct {
			Name      string  `json:"name"`
			Format    string  `json:"format"`
			RelRMSE   float64 `json:"rel_rmse"`
			MaxAbsErr float64 `json:"max_abs_err"`
		} `json:"tensors"`
	}
	b, err := os.ReadFile(rp)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	p, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	snap, _ := hfcache.OpenSnapshot(src)
	defer snap.Close()
	refs := map[string]hfcache.TensorRef{}
	for _, r := range snap.Tensors() {
		refs[r.Name] = r
	}
	checked := 0
	for _, tr := range rep.Tensors {
		tn, _ := p.Tensor(tr.Name)
		if tn.Format == codecs.Raw {
			if tr.RelRMSE != 0 || tr.MaxAbsErr != 0 {
				t.Errorf("raw %s reports error %g", tr.Name, tr.RelRMSE)
			}
			continue
		}
		m, _ := codecs.FlattenShape(tn.Shape)
		deq := make([]float32, m.Elements())
		enc, _ := p.TensorBytes(tn.Name)
		if err := codecs.DecodeRows(tn.Format, tn.DType, m, enc, 0, m.Rows, deq); err != nil {
			t.Fatal(err)
		}
		ref := make([]float32, m.Elements())
		if err := codecs.ToFloat32(tn.DType, refs[tn.Name].Bytes(), ref); err != nil {
			t.Fatal(err)
		}
		var se, ss, mx float64
		for i := range ref {
			d := float64(deq[i]) - float64(ref[i])
			se += d * d
			ss += float64(ref[i]) * float64(ref[i])
			mx = math.Max(mx, math.Abs(d))
		}
		rel := math.Sqrt(se / ss)
		if math.Abs(rel-tr.RelRMSE) > 1e-9*math.Max(1, rel) || math.Abs(mx-tr.MaxAbsErr) > 1e-12 {
			t.Errorf("%s (%s): report rel_rmse %g max %g, decoded %g %g", tr.Name, tr.Format, tr.RelRMSE, tr.MaxAbsErr, rel, mx)
		}
		if rel <= 0 || rel > 0.2 {
			t.Errorf("%s: implausible rel_rmse %g", tr.Name, rel)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no quantized tensor checked")
	}
}

func TestCancelLeavesNothing(t *testing.T) {
	src := tinySnapshot(t)
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Quantize(ctx, QuantizeOptions{Source: src, Out: out, Profile: "q4"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled quantize: %v", err)
	}
	assertNoOutput(t, out)
}
